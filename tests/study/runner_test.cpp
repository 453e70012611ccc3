// The runner's writers (issue 35.1, 35.4, 35.6): a study's processes die with it, one process writes a run folder
// at a time, a sweep's failed run makes it exit 1, a grid key names one field, and the runner's options are checked.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "io/folder_lock.h"
#include "study/sweep.h"
#include "train/tiny_corpus.h"

namespace normlab::study {
namespace {

using train::testing::expect_cli_error;
using train::testing::run_cli;
using train::testing::slurp;
using train::testing::spit;
using train::testing::TempDir;
using train::testing::tiny_config_doc;
namespace fs = std::filesystem;

// A sweep of one training run of `steps` steps in dir/sweep.json, writing into dir/sweep.
std::vector<std::string> one_run_sweep(const TempDir& dir, int steps) {
  spit(dir / "sweep.json", Json{{"base", tiny_config_doc(steps)}, {"grid", {{"model.placement", {"pre"}}}}}.dump());
  return {"sweep", (dir / "sweep.json").string(), "--out", (dir / "sweep").string()};
}

// The PID the lock file of a run folder names once a trainer holds it and has logged a step (0 if none has yet).
pid_t training_writer(const fs::path& run) {
  if (!fs::exists(run / "metrics.jsonl") || slurp(run / "metrics.jsonl").empty()) return 0;
  const std::string lock = slurp(run / ".lock");
  return lock.starts_with("pid ") ? std::stoi(lock.substr(4)) : 0;
}

pid_t wait_for_training_writer(const fs::path& run, pid_t runner) {
  pid_t writer = 0;
  for (int i = 0; i < 30000 && !(writer = training_writer(run)); ++i) {
    EXPECT_FALSE(train::testing::cli_exited(runner)) << "the command ended before its run trained";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return writer;
}

// kill -9 of the sweep process alone (not its process group): its trainer dies with it.
TEST(StudyRunner, AStudysTrainerDiesWithIt) {
  TempDir tmp("runner");
  const auto args = one_run_sweep(tmp, 1000000);
  const pid_t sweep = train::testing::start_cli(args, tmp / "sweep.log");
  const fs::path run = tmp / "sweep" / "runs" / "placement-pre_s1" / "run";
  const pid_t trainer = wait_for_training_writer(run, sweep);
  ASSERT_GT(trainer, 0);
  train::testing::ProcessId process;
  for (const auto& p : train::testing::descendants(sweep))
    if (p.pid == trainer) process = p;
  ASSERT_EQ(process.pid, trainer) << "the trainer is not the sweep's child";
  train::testing::kill_alone(sweep);
  for (int i = 0; i < 6000 && !train::testing::ended(process); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(train::testing::ended(process)) << "the trainer outlived its sweep";
}

// Two `normlab train` of one run folder: the second is refused, naming the first's PID, whether it resumes or starts
// anew (before, they collided only by chance, on a shared temporary file's name).
TEST(StudyRunner, ASecondWriterOfARunIsRefusedNamingTheFirst) {
  TempDir tmp("runner");
  spit(tmp / "config.json", tiny_config_doc(1000000).dump());
  const fs::path run = tmp / "run";
  const pid_t first =
      train::testing::start_cli({"train", "--config", (tmp / "config.json").string(), "--run", run.string()});
  ASSERT_EQ(wait_for_training_writer(run, first), first);
  const std::string holder = fmt::format("PID {}", first);
  expect_cli_error(run_cli({"train", "--run", run.string(), "--resume"}, tmp.path()),
                   {"run folder", run.string(), holder, "two writers"});
  expect_cli_error(run_cli({"train", "--config", (tmp / "config.json").string(), "--run", run.string()}, tmp.path()),
                   {holder});
  train::testing::kill_cli(first);
}

// A study whose run folder another process still writes refuses to run, naming it, before it changes anything;
// once that writer is gone, the same command finishes the run.
TEST(StudyRunner, ARerunRefusesARunFolderStillBeingWritten) {
  TempDir tmp("runner");
  const auto args = one_run_sweep(tmp, 2);
  ASSERT_EQ(run_cli(args, tmp.path()).exit_code, 0);
  const fs::path entry = tmp / "sweep" / "runs" / "placement-pre_s1";
  fs::remove(entry / "status.json");  // as if it had been killed during the run
  {
    io::FolderLock held(entry / "run", "run folder");  // a writer that is not an orphan of an ended study
    const std::string before = slurp(entry / "request.json");
    expect_cli_error(run_cli(args, tmp.path()), {"run folder", fmt::format("PID {}", ::getpid())});
    EXPECT_FALSE(fs::exists(entry / "status.json"));
    EXPECT_EQ(slurp(entry / "request.json"), before);
  }
  const auto again = run_cli(args, tmp.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(fs::exists(entry / "status.json"));
}

// One study process per study folder.
TEST(StudyRunner, TwoRunnersOfOneStudyFolderAreRefused) {
  TempDir tmp("runner");
  const auto args = one_run_sweep(tmp, 2);
  io::FolderLock held(tmp / "sweep", "study folder");
  expect_cli_error(run_cli(args, tmp.path()), {"study folder", fmt::format("PID {}", ::getpid())});
}

// A sweep whose run failed exits 1 after writing its report, naming the failed run and its error.
TEST(StudyRunner, ASweepWithAFailedRunExitsNonZero) {
  TempDir tmp("runner");
  Json base = tiny_config_doc(2);
  base["data"]["dir"] = (tmp / "no_such_tokens").string();  // every run fails at its start
  spit(tmp / "sweep.json", Json{{"base", base}, {"grid", {{"model.placement", {"pre", "post"}}}}}.dump());
  const auto r = run_cli({"sweep", (tmp / "sweep.json").string(), "--out", (tmp / "sweep").string()}, tmp.path());
  expect_cli_error(r, {"2 of the sweep's 2 runs failed", "summary.csv", "rerun"});
  EXPECT_NE(r.err.find("sweep: failed run placement-pre_s1: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no_such_tokens"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(tmp / "sweep" / "report.md"));
  EXPECT_NE(slurp(tmp / "sweep" / "summary.csv").find("placement-pre_s1,train,failed"), std::string::npos);
}

// Issue 47.2: under a file size limit a sweep's trainer fails with its own message (File too large, the checkpoint),
// which the sweep reports, rather than dying of SIGXFSZ and being reported as killed by signal 25.
TEST(StudyRunner, AFileSizeLimitIsReportedAsTheRunsWriteFailure) {
  TempDir tmp("runner");
  // d 128: a checkpoint several times the size of the sweep's own biggest file (its report), so that one limit
  // stops the trainer and lets the sweep report it.
  Json base = tiny_config_doc(2);
  base["model"]["d_model"] = 128;
  base["model"]["d_ff"] = 256;
  spit(tmp / "sweep.json", Json{{"base", base}, {"grid", {{"model.placement", {"pre"}}}}}.dump());
  const std::vector<std::string> args = {"sweep", (tmp / "sweep.json").string(), "--out", (tmp / "sweep").string()};
  const auto sized = run_cli(args, tmp.path());  // unlimited, for the sizes of its files
  ASSERT_EQ(sized.exit_code, 0) << train::testing::describe(sized);
  std::uintmax_t checkpoint = 0, others = 0;
  for (const auto& e : fs::recursive_directory_iterator(tmp / "sweep"))
    if (e.path().filename() == "checkpoint.safetensors") checkpoint = e.file_size();
    else if (e.is_regular_file()) others = std::max(others, e.file_size());
  // ulimit -f counts blocks of 512 bytes in dash and of 1024 in bash: between the two sizes either way.
  const std::uintmax_t blocks = checkpoint * 3 / 4 / 1024;
  ASSERT_GT(blocks * 512, others) << "the checkpoint is too small against the sweep's other files";
  fs::remove_all(tmp / "sweep");
  std::string command =
      fmt::format("ulimit -f {} && OMP_NUM_THREADS=2 {}", blocks, train::testing::shell_quote(NORMLAB_BINARY));
  for (const std::string& a : args) command.append(" ").append(train::testing::shell_quote(a));
  const auto r = train::testing::run_captured(command, tmp.path());
  expect_cli_error(r, {"1 of the sweep's 1 runs failed"});
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("signal"), std::string::npos) << r.err;
}

// A grid key names one field: a key naming a section, or a value that is an object, would replace the whole section.
TEST(StudyRunner, AGridKeyMustNameOneField) {
  const auto expand = [](const Json& grid) {
    return expand_sweep(Json{{"base", Json::object()}, {"grid", grid}}, "grid.json");
  };
  const auto refused = [&](const Json& grid, std::initializer_list<std::string_view> fragments) {
    try {
      expand(grid);
      ADD_FAILURE() << "accepted " << grid.dump();
    } catch (const Error& e) {
      for (std::string_view f : fragments)
        EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what() << "\nlacks: " << f;
    }
  };
  refused({{"model.norm", {Json{{"type", "rmsnorm"}}}}},
          {"grid.json", "grid key 'model.norm' names a whole section", "model.norm.type"});
  refused({{"model", {Json{{"n_layers", 2}}}}}, {"'model' names a whole section", "model.n_layers"});
  refused({{"train", {1}}}, {"'train' names a whole section"});
  refused({{"model.options", {Json{{"qk_norm", "full"}}}}}, {"'model.options'", "model.options.qk_norm"});
  refused({{"model.encoder_settings", {Json{{"a", 1}}}}}, {"'model.encoder_settings' names a whole section"});
  EXPECT_EQ(expand({{"model.norm.type", {"layernorm", "rmsnorm"}}}).size(), 2u);
  EXPECT_EQ(expand({{"model.options.qk_norm", {"none", "full"}}}).size(), 2u);
  EXPECT_EQ(expand({{"model.encoder_layers", {2}}}).size(), 1u);  // a leaf only some shapes have
}

// --jobs, --threads and --ranks-per-run below 1 are refused by study and sweep before anything runs.
TEST(StudyRunner, RunnerOptionsBelowOneAreRefused) {
  TempDir tmp("runner");
  const auto sweep = one_run_sweep(tmp, 2);
  for (const auto& [option, value] : std::vector<std::pair<std::string, std::string>>{
           {"--jobs", "0"}, {"--threads", "-1"}, {"--ranks-per-run", "0"}, {"--jobs", "-3"}}) {
    SCOPED_TRACE(option + " " + value);
    std::vector<std::string> args = sweep;
    args.insert(args.end(), {option, value});
    expect_cli_error(run_cli(args, tmp.path()), {fmt::format("{} {}", option, value), "give"});
    expect_cli_error(
        run_cli({"study", "layer-importance", "--quick", "--out", (tmp / "study").string(), option, value}, tmp.path()),
        {fmt::format("{} {}", option, value)});
  }
  EXPECT_FALSE(fs::exists(tmp / "sweep"));
  EXPECT_FALSE(fs::exists(tmp / "study"));
}

// --jobs left out is one run per core: --threads 2 runs two at once on one thread each (status.json's threads); --jobs
// 1 gives its one run both.
TEST(StudyRunner, JobsLeftOutRunOnePerCore) {
  TempDir tmp("runner");
  spit(tmp / "sweep.json", Json{{"base", tiny_config_doc(2)}, {"grid", {{"model.placement", {"pre", "post"}}}}}.dump());
  const auto threads_of = [&](const std::string& out, std::vector<std::string> options) {
    std::vector<std::string> args = {"sweep", (tmp / "sweep.json").string(), "--out", (tmp / out).string()};
    args.insert(args.end(), options.begin(), options.end());
    const auto r = run_cli(args, tmp.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Json::parse(slurp(tmp / out / "runs" / "placement-pre_s1" / "status.json"))["threads"].get<int>();
  };
  EXPECT_EQ(threads_of("auto", {"--threads", "2"}), 1);
  EXPECT_EQ(threads_of("one", {"--threads", "2", "--jobs", "1"}), 2);
  RunnerOptions options{.threads = 6, .ranks_per_run = 2};
  EXPECT_EQ(jobs_per_core(options), 3);
  options.threads = 1;
  EXPECT_EQ(jobs_per_core(options), 1);
}

// train.steps = 0 trains nothing: a study refuses it with a sentence naming the field, before any run.
TEST(StudyRunner, AStudyOfZeroStepsIsRefused) {
  TempDir tmp("runner");
  const auto r = run_cli({"study", "layer-importance", "--quick", "--out", (tmp / "study").string(), "--set",
                          "data.dir=" + train::testing::tiny_data_dir().string(), "--set", "train.steps=0"},
                         tmp.path());
  expect_cli_error(r, {"--set train.steps=0", "train.steps", "out of range", "nothing was run"});
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "study" / "runs"));
}

}  // namespace
}  // namespace normlab::study
