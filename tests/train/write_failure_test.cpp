// Every write of a training run is checked (issue 11.3): a full disk at any write site (metrics.jsonl,
// the probe files, config.json, summary.json, the checkpoint) stops `normlab train` with exit status 1
// and one message naming the file, the OS error and what is still intact; the last checkpoint loads,
// and resuming after the failure reproduces the uninterrupted run. Failures are injected with
// NORMLAB_FAIL_WRITES (io/atomic_file.h) in the child, or io::testing::FailWrites in process.
#include <gtest/gtest.h>

#include <cerrno>

#include "io/atomic_file.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

using testing::describe;
using testing::expect_cli_error;
using testing::expect_identical_records;
using testing::run_cli;
using testing::spit;
using testing::TempDir;
using testing::tiny_config;
using testing::tiny_config_doc;
using testing::train_records;
namespace fs = std::filesystem;

// 6 steps, a checkpoint every 2, probes (when asked) every 2.
struct Fixture {
  TempDir tmp{"write_failure"};
  fs::path config = tmp / "config.json", run = tmp / "run";

  explicit Fixture(bool probes = false) {
    Json doc = tiny_config_doc(6);
    doc["train"]["checkpoint_every"] = 2;
    if (probes) doc["train"]["probe_every"] = 2;
    spit(config, doc.dump());
  }
  testing::CliResult train(const std::string& fail_writes = "") {
    return run_cli({"train", "--config", config.string(), "--run", run.string()}, tmp.path(),
                   fail_writes.empty() ? std::vector<std::string>{}
                                       : std::vector<std::string>{"NORMLAB_FAIL_WRITES=" + fail_writes});
  }
  testing::CliResult resume() { return run_cli({"train", "--run", run.string(), "--resume"}, tmp.path()); }
  // The step of the checkpoint on disk, loaded the way --resume loads it.
  int checkpoint_step() const {
    const RunConfig c = checkpoint_config(run / kCheckpointFile);
    auto m = model::build_model(c.model, c.train.batch_size, c.train.seq_len);
    return load_checkpoint(run / kCheckpointFile, *m, nullptr);
  }
};

// The same 6 steps, uninterrupted, once per test process.
const std::vector<testing::TrainRecord>& straight_records() {
  static const std::vector<testing::TrainRecord> records = [] {
    Fixture f;
    const auto r = f.train();
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return train_records(f.run);
  }();
  return records;
}

TEST(TrainWriteFailure, MetricsAppendStopsTheRunAndResumeRecovers) {
  Fixture f;
  // Lines 1-3 (steps 1-3) are written; step 4's fails half-written, before its checkpoint.
  const auto r = f.train("metrics.jsonl:ENOSPC:3");
  expect_cli_error(r, {(f.run / "metrics.jsonl").string(), "No space left on device", "free disk space",
                       "the checkpoint of step 2", "is intact"});
  EXPECT_FALSE(fs::exists(f.run / "summary.json"));
  EXPECT_EQ(f.checkpoint_step(), 2);

  const auto resumed = f.resume();
  ASSERT_EQ(resumed.exit_code, 0) << describe(resumed);
  expect_identical_records(straight_records(), train_records(f.run));  // the torn line is gone
}

TEST(TrainWriteFailure, CheckpointFailureKeepsThePreviousCheckpoint) {
  Fixture f;
  const auto r = f.train("checkpoint.safetensors:ENOSPC:1");  // step 2's is written, step 4's fails
  expect_cli_error(r, {(f.run / "checkpoint.safetensors").string(), "No space left on device",
                       "the checkpoint of step 2", "is intact"});
  EXPECT_EQ(f.checkpoint_step(), 2);
  EXPECT_TRUE(testing::temp_files(f.run).empty());
  EXPECT_EQ(Json::parse(testing::slurp(f.run / kCheckpointJson)).at("step"), 2);

  const auto resumed = f.resume();
  ASSERT_EQ(resumed.exit_code, 0) << describe(resumed);
  expect_identical_records(straight_records(), train_records(f.run));
}

// checkpoint.json is written after checkpoint.safetensors: when it fails, the message names the step of the
// safetensors file that is on disk (the one a resume continues from), not the one before it.
TEST(TrainWriteFailure, CheckpointJsonFailureNamesTheStepOnDisk) {
  Fixture f;
  const auto r = f.train("checkpoint.json:ENOSPC:1");  // step 2's is written, step 4's fails
  expect_cli_error(
      r, {(f.run / kCheckpointJson).string(), "No space left on device", "the checkpoint of step 4", "is intact"});
  EXPECT_EQ(f.checkpoint_step(), 4);
  EXPECT_TRUE(testing::temp_files(f.run).empty());

  const auto resumed = f.resume();
  ASSERT_EQ(resumed.exit_code, 0) << describe(resumed);
  expect_identical_records(straight_records(), train_records(f.run));
}

TEST(TrainWriteFailure, ConfigAndSummaryWritesAreChecked) {
  {
    Fixture f;
    const auto r = f.train("config.json:ENOSPC");
    expect_cli_error(r, {(f.run / "config.json").string(), "No space left on device"});
    EXPECT_FALSE(fs::exists(f.run / kCheckpointFile));
  }
  Fixture f;
  const auto r = f.train("summary.json:EIO");
  expect_cli_error(r, {(f.run / "summary.json").string(), "Input/output error", "the checkpoint of step 6"});
  EXPECT_EQ(r.out.find("done:"), std::string::npos) << describe(r);
  EXPECT_FALSE(fs::exists(f.run / "summary.json"));
  EXPECT_EQ(f.checkpoint_step(), 6);
}

TEST(TrainWriteFailure, ProbeFilesAreChecked) {
  for (const char* file : {"probes.jsonl", "probes.csv"}) {
    Fixture f(true);
    // Skip the writes of probe steps 1 and 2 (and the CSV's header), fail within step 4's.
    const auto r = f.train(fmt::format("{}:ENOSPC:16", file));
    expect_cli_error(r, {(f.run / file).string(), "No space left on device", "the checkpoint of step 2"});
    EXPECT_EQ(f.checkpoint_step(), 2) << file;
    EXPECT_FALSE(fs::exists(f.run / "summary.json")) << file;
  }
}

// In process, the trainer's error is an io::WriteError; the probe reference file is written atomically.
TEST(TrainWriteFailure, ProbeReferenceWriteIsCheckedInProcess) {
  TempDir tmp("write_failure");
  RunConfig c = tiny_config(4);
  c.train.probe_every = 2;
  io::testing::FailWrites full("probe_reference", ENOSPC);
  try {
    Trainer(c, tmp / "run", {}).run();
    FAIL() << "the failed write went unnoticed";
  } catch (const io::WriteError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("probe_reference.safetensors"), std::string::npos) << message;
    EXPECT_NE(message.find("no checkpoint was saved"), std::string::npos) << message;
  }
  EXPECT_TRUE(testing::temp_files(tmp / "run").empty());
}

// profile.json (normlab train --profile) is written atomically after the last checkpoint: a failed write stops the
// run before summary.json, and says that checkpoint is intact.
TEST(TrainWriteFailure, ProfileWriteIsCheckedInProcess) {
  TempDir tmp("write_failure");
  io::testing::FailWrites full("profile.json", ENOSPC);
  try {
    Trainer(tiny_config(4), tmp / "run", {false, -1, nullptr, true}).run();
    FAIL() << "the failed write went unnoticed";
  } catch (const io::WriteError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("profile.json"), std::string::npos) << message;
    EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
    EXPECT_NE(message.find("the checkpoint of step 4"), std::string::npos) << message;
  }
  EXPECT_TRUE(testing::temp_files(tmp / "run").empty());
  EXPECT_FALSE(fs::exists(tmp / "run" / "summary.json"));
}

// The other commands' writes go through the same checked writers: each write of a sweep (the runner's per-run
// request.json and status.json, summary.csv, the report's three files, the studies.html index) and of `normlab
// prepare` stops the command with the file and the OS error.
TEST(WriteFailure, EverySweepAndPrepareWriteIsChecked) {
  TempDir tmp("write_failure");
  spit(tmp / "sweep.json", Json{{"base", tiny_config_doc(2)}, {"grid", {{"model.placement", {"pre"}}}}}.dump());
  for (const std::string file :
       {"request.json", "status.json", "summary.csv", "report.md", "report.json", "report.html", "studies.html"}) {
    const auto r =
        run_cli({"sweep", (tmp / "sweep.json").string(), "--out", (tmp / ("sweep_" + file)).string(), "--jobs", "1"},
                tmp.path(), {"NORMLAB_FAIL_WRITES=" + file + ":ENOSPC"});
    expect_cli_error(r, {file, "No space left on device"});
  }
  spit(tmp / "corpus.txt", testing::tiny_corpus_text());
  for (const std::string file : {"tokenizer.model", "train.bin", "val.bin", "meta.json"}) {
    const auto r = run_cli({"prepare", "-i", (tmp / "corpus.txt").string(), "-o", (tmp / ("tokens_" + file)).string(),
                            "--vocab-size", "120"},
                           tmp.path(), {"NORMLAB_FAIL_WRITES=" + file + ":ENOSPC"});
    expect_cli_error(r, {file, "No space left on device"});
  }
}

// Issue 47.2: a file size limit (ulimit -f) is a write failure like a full disk. SIGXFSZ is ignored, so the write
// returns EFBIG and the run stops with the usual message and no temporary file, rather than dying of the signal;
// the checkpoint before it resumes to the uninterrupted run.
TEST(TrainWriteFailure, FileSizeLimitStopsTheRunWithTheMessage) {
  Fixture f;
  const auto first =
      run_cli({"train", "--config", f.config.string(), "--run", f.run.string(), "--stop-after", "2"}, f.tmp.path());
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  // ulimit -f counts blocks of 512 bytes in dash and of 1024 in bash: either way below the checkpoint's size and
  // far above every other file's.
  const auto blocks = fs::file_size(f.run / kCheckpointFile) / 2 / 1024;
  ASSERT_GT(blocks, 8u);
  const auto limited =
      testing::run_captured(fmt::format("ulimit -f {} && OMP_NUM_THREADS=2 {} train --run {} --resume", blocks,
                                        testing::shell_quote(NORMLAB_BINARY), testing::shell_quote(f.run.string())),
                            f.tmp.path());
  expect_cli_error(limited, {kCheckpointFile, "File too large", "the checkpoint of step 2", "is intact"});
  for (const auto& e : fs::directory_iterator(f.run))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path() << " was left behind";
  EXPECT_EQ(f.checkpoint_step(), 2);
  const auto resumed = f.resume();
  ASSERT_EQ(resumed.exit_code, 0) << describe(resumed);
  expect_identical_records(straight_records(), train_records(f.run));
}

TEST(TrainWriteFailure, MalformedFaultRuleIsRefused) {
  Fixture f;
  expect_cli_error(f.train("metrics.jsonl"), {"NORMLAB_FAIL_WRITES", "<path part>:<errno>"});
  expect_cli_error(f.train("metrics.jsonl:ENOTANERRNO"), {"NORMLAB_FAIL_WRITES"});
}

}  // namespace
}  // namespace normlab::train
