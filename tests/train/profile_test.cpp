// normlab train --profile: every node of every training pass is timed exactly once under its op kind,
// evaluation and probe passes are kept out of the op table, and profiling changes no result.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "engine/ops.h"
#include "tiny_corpus.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

using testing::expect_identical_records;
using testing::slurp;
using testing::TempDir;
using testing::tiny_config;
using testing::train_records;
namespace fs = std::filesystem;

// A run with grad accumulation, evaluation and probes mid-run, so that the op counts can tell a training
// pass from an evaluation or probe pass.
RunConfig busy_config() {
  RunConfig c = tiny_config(6);
  c.train.grad_accum = 2;
  c.train.eval_every = 3;
  c.train.probe_every = 2;
  c.train.checkpoint_every = 3;
  return c;
}

TEST(TrainProfile, TimesEachNodeOfEachTrainingPassOnceAndNothingElse) {
  TempDir tmp;
  std::ostringstream progress;
  Trainer trainer(busy_config(), tmp / "run", {false, -1, &progress, true});
  trainer.run();

  const engine::Graph& g = trainer.model().graph;
  std::map<std::string, int64_t> forward_nodes, backward_nodes;
  // The kernels a pass runs: a fused pair (engine/fusion.h) is one, under its fused kind.
  const std::vector<engine::Node>& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const engine::Node& n = nodes[i];
    const std::string kind = engine::op_def(n.fused_with_next ? n.fused_op : n.op).name;
    ++forward_nodes[kind];
    if (g.requires_grad(n.out)) ++backward_nodes[kind];
    i += n.fused_with_next;
  }
  EXPECT_TRUE(forward_nodes.contains("add_layer_norm")) << "the model has fused pairs, so they are counted here";
  const Json p = Json::parse(slurp(tmp / "run" / "profile.json"));
  EXPECT_EQ(p.at("first_step"), 1);
  EXPECT_EQ(p.at("last_step"), 6);
  const int64_t passes = 6 * 2;  // steps × micro-batches; evaluation and probe passes must not count
  ASSERT_EQ(p.at("ops").size(), forward_nodes.size()) << "one row per op kind on the tape";
  double op_seconds = 0;
  for (const Json& row : p.at("ops")) {
    const std::string op = row.at("op");
    EXPECT_EQ(row.at("forward_calls").get<int64_t>(), passes * forward_nodes[op]) << op;
    EXPECT_EQ(row.at("backward_calls").get<int64_t>(), passes * backward_nodes[op]) << op;
    EXPECT_GE(row.at("forward_s").get<double>(), 0) << op;
    EXPECT_GE(row.at("backward_s").get<double>(), 0) << op;
    op_seconds += row.at("forward_s").get<double>() + row.at("backward_s").get<double>();
    EXPECT_NE(progress.str().find("\n  " + op + " "), std::string::npos) << "the table lists " << op;
  }
  const Json& phases = p.at("phases_s");
  EXPECT_DOUBLE_EQ(phases.at("forward_backward").get<double>(), op_seconds);
  double claimed = 0;
  for (const char* key : {"forward_backward", "optimizer", "grad_norm", "data", "eval", "probes", "checkpoints"}) {
    EXPECT_GT(phases.at(key).get<double>(), 0) << key << " ran in this run, so it took some time";
    claimed += phases.at(key).get<double>();
  }
  EXPECT_LE(claimed, p.at("loop_s").get<double>() * (1 + 1e-9)) << "phases are disjoint parts of the loop";
  EXPECT_NE(progress.str().find("profile of steps 1-6"), std::string::npos) << progress.str();
}

TEST(TrainProfile, ProfilingChangesNoResult) {
  TempDir tmp;
  const RunConfig c = busy_config();
  Trainer plain(c, tmp / "plain", {false, -1, nullptr, false});
  const TrainSummary a = plain.run();
  Trainer profiled(c, tmp / "profiled", {false, -1, nullptr, true});
  const TrainSummary b = profiled.run();
  expect_identical_records(train_records(tmp / "plain"), train_records(tmp / "profiled"));
  EXPECT_EQ(a.val_loss, b.val_loss);
  EXPECT_FALSE(fs::exists(tmp / "plain" / "profile.json")) << "profile.json only with --profile";
}

}  // namespace
}  // namespace normlab::train
