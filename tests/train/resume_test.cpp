// Stop + resume reproduces an uninterrupted run bit for bit: batches and dropout masks are functions
// of (seed, step), and the checkpoint restores the weights and both AdamW moments.
#include <gtest/gtest.h>

#include <map>

#include "io/safetensors.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

using testing::expect_identical_records;
using testing::slurp;
using testing::TempDir;
using testing::tiny_config;
using testing::train_records;
namespace fs = std::filesystem;

TrainSummary train(const RunConfig& c, const fs::path& dir, bool resume = false, int stop_after = -1) {
  Trainer t(c, dir, {resume, stop_after, nullptr});
  return t.run();
}

// What `normlab train --resume` does: continue with the run's own config.json.
TrainSummary resume(const fs::path& dir, int stop_after = -1) {
  const Json doc = Json::parse(slurp(dir / "config.json"));
  return train(read_run_config(doc, (dir / "config.json").string()), dir, true, stop_after);
}

std::vector<Json> eval_records(const fs::path& dir) {
  std::vector<Json> out;
  for (const auto& j : testing::read_metrics(dir))
    if (j.at("type") == "eval") out.push_back(j);
  return out;
}

TEST(TrainResume, StopAndResumeMatchesStraightRun) {
  TempDir tmp;
  const RunConfig c = tiny_config(12);
  const fs::path straight = tmp / "straight", split = tmp / "split";
  train(c, straight);

  const TrainSummary first = train(c, split, false, 6);
  EXPECT_EQ(first.steps, 6);
  EXPECT_FALSE(fs::exists(split / "summary.json")) << "a stopped run is not finished";
  EXPECT_EQ(Json::parse(slurp(split / kCheckpointJson)).at("step"), 6);
  ASSERT_EQ(train_records(split).size(), 6u);

  const TrainSummary second = resume(split);
  EXPECT_EQ(second.steps, 12);
  ASSERT_EQ(train_records(straight).size(), 12u);
  expect_identical_records(train_records(straight), train_records(split));
  EXPECT_EQ(eval_records(straight), eval_records(split));
  // Same weights and the same AdamW moments, byte for byte.
  EXPECT_TRUE(slurp(straight / kCheckpointFile) == slurp(split / kCheckpointFile));
  EXPECT_TRUE(fs::exists(split / "summary.json"));
}

// The spike detectors' windows travel in the checkpoint: a resumed run judges its next losses against
// every loss before them, as the uninterrupted run does (an empty window would flag no spike for 20 steps).
TEST(TrainResume, SpikeDetectorWindowsTravelInTheCheckpoint) {
  TempDir tmp;
  const RunConfig c = tiny_config(12);
  const fs::path split = tmp / "split";
  train(c, split, false, 6);
  const auto losses = [&] {
    std::vector<double> out;
    for (const auto& r : train_records(split)) out.push_back(r.loss);
    return out;
  };
  Json state = checkpoint_trainer_state(split / kCheckpointFile);
  EXPECT_EQ(state.at("loss_spikes").get<std::vector<double>>(), losses());
  EXPECT_EQ(state.at("grad_spikes").size(), 6u);
  resume(split);
  state = checkpoint_trainer_state(split / kCheckpointFile);
  EXPECT_EQ(state.at("loss_spikes").get<std::vector<double>>(), losses()) << "the window restarted on resume";
  EXPECT_EQ(state.at("grad_spikes").size(), 12u);
}

TEST(TrainResume, GradAccumDropoutClipAndWarmupSurviveTwoStops) {
  TempDir tmp;
  RunConfig c = tiny_config(10);
  c.train.grad_accum = 2;
  c.model.dropout = 0.1;
  c.train.clip = 0.05;  // small enough that every step is clipped
  c.train.schedule = "cosine";
  c.train.warmup = 4;
  c.train.eval_every = 4;
  const fs::path straight = tmp / "straight", split = tmp / "split";
  train(c, straight);
  train(c, split, false, 3);
  resume(split, 7);
  resume(split);

  const auto a = train_records(straight), b = train_records(split);
  ASSERT_EQ(a.size(), 10u);
  expect_identical_records(a, b);
  for (const auto& r : a) EXPECT_GT(r.grad_norm, c.train.clip) << "step " << r.step << " was not clipped";
  EXPECT_EQ(eval_records(straight), eval_records(split));
  EXPECT_EQ(eval_records(split).size(), 3u);  // steps 4, 8 and the final 10
  EXPECT_TRUE(slurp(straight / kCheckpointFile) == slurp(split / kCheckpointFile));
}

TEST(TrainResume, DropoutMakesADifference) {
  // Guards the test above: with dropout on, the losses differ from a run without it.
  TempDir tmp;
  RunConfig c = tiny_config(3);
  train(c, tmp / "plain");
  c.model.dropout = 0.1;
  train(c, tmp / "dropout");
  EXPECT_NE(train_records(tmp / "plain").front().loss, train_records(tmp / "dropout").front().loss);
}

TEST(TrainResume, LosingTheAdamWMomentsWouldBeDetected) {
  // Rewrite the stopped run's checkpoint with zeroed optim.m.* / optim.v.*: the resumed run must then
  // diverge from the straight one, which shows the comparison above really depends on the moments.
  TempDir tmp;
  const RunConfig c = tiny_config(10);
  const fs::path straight = tmp / "straight", split = tmp / "split";
  train(c, straight);
  train(c, split, false, 5);

  const fs::path file = split / kCheckpointFile;
  const auto f = io::SafetensorsFile::read(file, "checkpoint");
  std::vector<std::vector<float>> zeros;
  zeros.reserve(f.entries().size());
  std::vector<io::TensorToWrite> entries;
  int moments = 0;
  for (const auto& e : f.entries()) {
    const void* data = e.data.data();
    if (e.name.starts_with("optim.")) {
      ASSERT_EQ(e.dtype, io::Dtype::F32) << e.name << ": an fp32 run keeps fp32 moments";
      bool nonzero = false;
      for (double v : e.to_f64_vector()) nonzero |= v != 0;
      EXPECT_TRUE(nonzero) << e.name << " was saved as all zeros";
      zeros.emplace_back(static_cast<size_t>(e.numel()), 0.0f);
      data = zeros.back().data();
      ++moments;
    }
    entries.push_back({e.name, e.dtype, e.shape, data});
  }
  ASSERT_GT(moments, 0);
  auto metadata = f.metadata();
  metadata["data_fnv1a64"] = data_checksum(entries);  // a consistent file: only the moments changed
  metadata["metadata_fnv1a64"] = metadata_checksum(metadata);
  io::write_safetensors(file, entries, metadata);

  resume(split);
  const auto a = train_records(straight), b = train_records(split);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a[5].loss, b[5].loss) << "step 6 runs on the restored weights, before any update";
  bool differs = false;
  for (size_t i = 6; i < a.size(); ++i) differs |= a[i].loss != b[i].loss;
  EXPECT_TRUE(differs) << "zeroed moments did not change the resumed losses";
}

TEST(TrainResume, CheckpointRestoresMomentsExactly) {
  TempDir tmp;
  const RunConfig c = tiny_config(4);
  Trainer t(c, tmp / "run", {false, -1, nullptr});
  t.run();
  RunConfig stored = checkpoint_config(tmp / "run" / kCheckpointFile);
  auto m = model::build_model(stored.model, stored.train.batch_size, stored.train.seq_len);
  AdamW opt(m->graph);
  EXPECT_EQ(load_checkpoint(tmp / "run" / kCheckpointFile, *m, &opt), 4);
  const auto f = io::SafetensorsFile::read(tmp / "run" / kCheckpointFile);
  const auto& params = m->graph.parameters();
  ASSERT_FALSE(params.empty());
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = m->graph.spec(params[i]).name;
    EXPECT_EQ(f.at("optim.m." + name).dtype, io::Dtype::F32) << name << ": an fp32 run keeps fp32 moments";
    EXPECT_EQ(opt.first_moment<float>(i), f.at("optim.m." + name).to_f32_vector()) << name;
    EXPECT_EQ(opt.second_moment<float>(i), f.at("optim.v." + name).to_f32_vector()) << name;
    EXPECT_EQ(opt.first_moment<float>(i).size(), static_cast<size_t>(m->graph.shape(params[i]).numel())) << name;
  }
}

TEST(TrainResume, ResumeRewritesMetricsAfterTheCheckpoint) {
  // A run that logged past its last checkpoint (killed between checkpoints) drops those lines on resume.
  TempDir tmp;
  RunConfig c = tiny_config(8);
  const fs::path straight = tmp / "straight", split = tmp / "split";
  train(c, straight);
  train(c, split, false, 4);
  {
    std::ofstream out(split / "metrics.jsonl", std::ios::app);
    out << R"({"type":"train","step":5,"loss":99.0,"lr":1.0,"grad_norm":1.0,"tokens_per_s":1.0,"elapsed_s":1.0})"
        << "\n";
  }
  resume(split);
  expect_identical_records(train_records(straight), train_records(split));
}

TEST(TrainResume, ResumeWithoutCheckpointIsRefused) {
  TempDir tmp;
  try {
    train(tiny_config(2), tmp / "empty", true);
    ADD_FAILURE() << "resume without a checkpoint was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot resume"), std::string::npos) << e.what();
  }
}

// Resuming a run that already reached train.steps is refused, and its summary.json is left alone.
TEST(TrainResume, ResumingAFinishedRunKeepsItsSummary) {
  TempDir tmp;
  const fs::path dir = tmp / "run";
  train(tiny_config(3), dir);
  const std::string before = slurp(dir / "summary.json");
  try {
    resume(dir);
  } catch (const Error&) {
    // refusing is a fine answer
  }
  EXPECT_EQ(slurp(dir / "summary.json"), before);
}

}  // namespace
}  // namespace normlab::train
