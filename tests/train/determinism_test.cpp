// Same seed and thread count → bit-identical runs; another seed → another run.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/error.h"
#include "io/corpus.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/loader.h"
#include "train/records.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

using testing::expect_identical_records;
using testing::slurp;
using testing::TempDir;
using testing::tiny_config;
using testing::train_records;
namespace fs = std::filesystem;

void train(const RunConfig& c, const fs::path& dir) {
  Trainer t(c, dir, {false, -1, nullptr});
  t.run();
}

RunConfig config_with_dropout(uint64_t seed) {
  RunConfig c = tiny_config(6);
  c.model.dropout = 0.1;
  c.train.grad_accum = 2;
  c.train.seed = seed;
  return c;
}

TEST(TrainDeterminism, SameSeedSameThreadsGivesIdenticalRuns) {
  TempDir tmp;
  train(config_with_dropout(5), tmp / "a");
  train(config_with_dropout(5), tmp / "b");
  const auto a = train_records(tmp / "a");
  ASSERT_EQ(a.size(), 6u);
  expect_identical_records(a, train_records(tmp / "b"));
  EXPECT_TRUE(slurp(tmp / "a" / kCheckpointFile) == slurp(tmp / "b" / kCheckpointFile));
  const Json sa = Json::parse(slurp(tmp / "a" / "summary.json")), sb = Json::parse(slurp(tmp / "b" / "summary.json"));
  EXPECT_EQ(sa.at(normlab::train::field::val_loss), sb.at(normlab::train::field::val_loss));
  EXPECT_EQ(sa.at("train_loss"), sb.at("train_loss"));
}

TEST(TrainDeterminism, DifferentSeedGivesDifferentRuns) {
  TempDir tmp;
  train(config_with_dropout(5), tmp / "a");
  train(config_with_dropout(6), tmp / "b");
  const auto a = train_records(tmp / "a"), b = train_records(tmp / "b");
  ASSERT_EQ(a.size(), b.size());
  int differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += a[i].loss != b[i].loss;
  EXPECT_EQ(differing, static_cast<int>(a.size())) << "seeds 5 and 6 share some losses";
}

// Recomputed attention probabilities change the memory, and the run only by rounding: the blocks' GEMMs sum in
// another order than the whole-row ones. At T 150 a row of queries spans three blocks of 64, the last one partial.
TEST(TrainDeterminism, RecomputedAttentionFollowsTheSavedRunToRounding) {
  TempDir tmp;
  RunConfig saved = config_with_dropout(5);
  saved.model.max_seq_len = saved.train.seq_len = 150;
  saved.train.batch_size = 2;
  RunConfig recomputed = saved;
  recomputed.engine.recompute_attention = true;
  // It is applied: the estimate of what is to allocate (for the whole batch; the process's resident part varies
  // between two estimates, under ASan most) drops by at least the probabilities, [B, H, T, T] floats per
  // layer (more: their gradient's scratch goes too).
  const auto b = static_cast<size_t>(saved.train.batch_size);
  const size_t probabilities = b * static_cast<size_t>(saved.model.n_heads * saved.model.n_layers) * 150 * 150 * 4;
  EXPECT_GE(plan_run(saved).memory.to_allocate(), plan_run(recomputed).memory.to_allocate() + probabilities);
  train(saved, tmp / "saved");
  train(recomputed, tmp / "recomputed");
  const auto x = train_records(tmp / "saved"), y = train_records(tmp / "recomputed");
  ASSERT_EQ(x.size(), 6u);
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i].loss, x[i].loss, 1e-5 * std::abs(x[i].loss)) << "step " << i;
  EXPECT_TRUE(read_run_config(Json::parse(R"({"engine": {"recompute_attention": true}})"), "config.json")
                  .engine.recompute_attention);
  EXPECT_FALSE(read_run_config(Json::object(), "config.json").engine.recompute_attention);
}

TEST(TrainDeterminism, EngineFuseChangesTheSpeedNotTheRun) {
  TempDir tmp;
  RunConfig unfused = config_with_dropout(5);
  unfused.engine.fuse = false;
  train(config_with_dropout(5), tmp / "fused");
  train(unfused, tmp / "unfused");
  const auto a = train_records(tmp / "fused");
  ASSERT_EQ(a.size(), 6u);
  expect_identical_records(a, train_records(tmp / "unfused"));
  const Json sa = Json::parse(slurp(tmp / "fused" / "summary.json")),
             sb = Json::parse(slurp(tmp / "unfused" / "summary.json"));
  EXPECT_EQ(sa.at(normlab::train::field::val_loss), sb.at(normlab::train::field::val_loss));

  EXPECT_FALSE(read_run_config(Json::parse(R"({"engine": {"fuse": false}})"), "config.json").engine.fuse);
  EXPECT_TRUE(read_run_config(Json::object(), "config.json").engine.fuse);
  try {
    read_run_config(Json::parse(R"({"engine": {"fused": false}})"), "config.json");
    ADD_FAILURE() << "an unknown engine key was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fused"), std::string::npos) << e.what();
  }
}

TEST(TrainLoader, BatchIsAPureFunctionOfSeedStepAndMicroBatch) {
  const io::TokenData data = io::load_tokens(testing::tiny_data_dir());
  const Loader a(data.train, data.val, 4, 16, 3), b(data.train, data.val, 4, 16, 3);
  Batch x, y;
  a.train_batch(7, 1, x);
  b.train_batch(2, 0, y);  // unrelated call in between: no hidden state
  b.train_batch(7, 1, y);
  EXPECT_EQ(x.tokens, y.tokens);
  EXPECT_EQ(x.targets, y.targets);
  ASSERT_EQ(x.tokens.size(), 64u);
  for (size_t r = 0; r < 4; ++r)  // targets are the tokens shifted by one
    for (size_t i = 0; i + 1 < 16; ++i) EXPECT_EQ(x.targets[r * 16 + i], x.tokens[r * 16 + i + 1]);
  b.train_batch(7, 0, y);
  EXPECT_NE(x.tokens, y.tokens) << "micro-batches 0 and 1 of a step read the same windows";
  b.train_batch(8, 1, y);
  EXPECT_NE(x.tokens, y.tokens) << "steps 7 and 8 read the same windows";
}

TEST(TrainLoader, TooShortSplitIsAOneLineError) {
  const std::vector<int32_t> train(100, 1), val(10, 1);
  try {
    Loader l(train, val, 4, 16, 1);
    ADD_FAILURE() << "a 10-token validation split was accepted for seq_len 16";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("validation split has 10 tokens"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// Regression: the batch Rng once took seed·φ + step·K + micro, and splitmix64 itself steps by φ, so
// seed s+1's window b was seed s's window b+1. The seed is now hashed before the step enters.
TEST(TrainLoader, AdjacentSeedsDrawUnrelatedWindows) {
  const io::TokenData data = io::load_tokens(testing::tiny_data_dir());
  const int rows = 8, seq = 16;
  const Loader s1(data.train, data.val, rows, seq, 1), s2(data.train, data.val, rows, seq, 2);
  int shared = 0;
  for (int step = 1; step <= 20; ++step) {
    Batch a, b;
    s1.train_batch(step, 0, a);
    s2.train_batch(step, 0, b);
    std::set<std::vector<int32_t>> windows;
    for (int r = 0; r < rows; ++r) windows.emplace(a.tokens.begin() + r * seq, a.tokens.begin() + (r + 1) * seq);
    for (int r = 0; r < rows; ++r)
      shared += windows.count({b.tokens.begin() + r * seq, b.tokens.begin() + (r + 1) * seq});
  }
  EXPECT_LE(shared, 2) << shared << " of 160 windows of seed 2 are also windows of seed 1 at the same step";
}

}  // namespace
}  // namespace normlab::train
