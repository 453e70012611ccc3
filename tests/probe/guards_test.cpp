// The training guards (src/probe/guards.h and their wiring in train/trainer.cpp): the running z-score
// spike detector, the first non-finite tensor in computation order, the clean non-finite stop that
// keeps a loadable last-good checkpoint, and skipping the update of a flagged spike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "common/error.h"
#include "probe/guards.h"
#include "probe_test_util.h"
#include "train/checkpoint.h"
#include "train/records.h"
#include "train/trainer.h"

namespace normlab::probe {
namespace {

namespace eng = normlab::engine;
using namespace testing;

TEST(ProbeGuards, SpikeDetectorScoresAgainstTheWindowAndKeepsSpikesOut) {
  SpikeDetector d(/*window=*/4, /*warmup=*/4, /*threshold=*/1.5);
  for (double x : {0.0, 2.0, 0.0, 2.0}) EXPECT_EQ(d.observe(x), 0.0) << "warm-up";
  // window {0, 2, 0, 2}: mean 1, population sd 1.
  EXPECT_DOUBLE_EQ(d.observe(3.0), 2.0);  // a spike: z 2 > 1.5, kept out of the window
  EXPECT_TRUE(d.is_spike(2.0));
  EXPECT_DOUBLE_EQ(d.observe(3.0), 2.0);    // so the same value scores the same again
  EXPECT_DOUBLE_EQ(d.observe(1.5), 0.5);    // not a spike: enters, the oldest (0) leaves → {2, 0, 2, 1.5}
  EXPECT_DOUBLE_EQ(d.observe(1.375), 0.0);  // mean of {2, 0, 2, 1.5} is 1.375
  EXPECT_FALSE(d.is_spike(-5.0));           // one-sided: a sudden drop is no spike
  SpikeDetector off(4, 0, 0.0);
  EXPECT_FALSE(off.is_spike(1e9)) << "threshold 0 turns the detector off";
}

// A model after forward + backward in fp32, with one value poisoned.
struct Poisoned {
  train::RunConfig config = tiny_run({{"placement", "pre"}});
  std::unique_ptr<model::Model> m = fresh_model(config);
  void run() {
    train::Batch batch;
    make_loader(config).train_batch(1, 0, batch);
    m->set_batch(batch.tokens.data(), batch.targets.data());
    m->graph.zero_param_grads();
    m->forward(true);
    m->graph.backward(m->loss);
  }
  float* param(const std::string& name) { return m->graph.data<float>(m->graph.at(name)); }
};

TEST(ProbeGuards, FirstNonFiniteNamesTheFirstTensorInComputationOrder) {
  Poisoned p;
  p.run();
  EXPECT_EQ(first_nonfinite(p.m->graph), "");
  EXPECT_TRUE(parameters_finite(p.m->graph));

  // A NaN in layer 1's query weights: the first activation it reaches is that linear map's output.
  p.param("layers.1.attn.q.weight")[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(parameters_finite(p.m->graph));
  p.run();
  EXPECT_EQ(first_nonfinite(p.m->graph), "layers.1.attn.q.out (activation)");

  // Activations finite, one parameter gradient not: named as a parameter gradient.
  Poisoned q;
  q.run();
  const eng::TensorId w = q.m->graph.at("layers.0.ffn.fc2.weight");
  q.m->graph.grad<float>(w)[0] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_nonfinite(q.m->graph), "layers.0.ffn.fc2.weight (parameter gradient)");
  EXPECT_TRUE(parameters_finite(q.m->graph));
}

// The stop message places the tensor in the model. Tensors outside the blocks used to all read
// "before the first layer", the head's logits and the loss included.
TEST(ProbeGuards, LocationOfPlacesEveryTensorOfTheModel) {
  EXPECT_EQ(location_of("layers.3.attn.q.out (activation)"), "in layer 3");
  EXPECT_EQ(location_of("layers.12.ffn.residual (gradient)"), "in layer 12");
  EXPECT_EQ(location_of("embed.tokens.out (activation)"), "before the first layer");
  EXPECT_EQ(location_of("embed.tokens.weight (parameter gradient)"), "before the first layer");
  EXPECT_EQ(location_of("dlcl.norms.2.out (activation)"), "in the layer combination");
  EXPECT_EQ(location_of("final_norm.out (activation)"), "after the last layer");
  EXPECT_EQ(location_of("logits (activation)"), "after the last layer");
  EXPECT_EQ(location_of("loss (activation)"), "after the last layer");
  EXPECT_EQ(location_of("lm_head.weight (parameter gradient)"), "after the last layer");
  // Every tensor of a real model gets a place, consistent with its name.
  const train::RunConfig c = tiny_run({{"placement", "pre"}, {"tied_embeddings", false}});
  auto m = model::build_model(c.model, c.train.batch_size, c.train.seq_len);
  for (size_t i = 0; i < m->graph.tensor_count(); ++i) {
    const std::string& name = m->graph.spec(static_cast<eng::TensorId>(i)).name;
    const std::string where = location_of(name);
    if (name.starts_with("layers.")) {
      EXPECT_TRUE(where.starts_with("in layer ")) << name;
    } else if (!name.starts_with("embed") && name != "tokens" && name != "targets") {
      EXPECT_EQ(where, "after the last layer") << name;
    }
  }
}

// Post-LN without clipping at the largest lr the config accepts (100) diverges within a few steps;
// the run must stop with a message naming the layer and the tensor, a non_finite metrics record, and
// a checkpoint of the last good step that loads and evaluates.
TEST(ProbeGuards, NonFiniteStopNamesLayerAndTensorAndLeavesALoadableCheckpoint) {
  TempDir tmp;
  const train::RunConfig c = tiny_run({{"placement", "post"}}, {{"lr", 100.0}, {"clip", 0.0}, {"steps", 30}});
  const fs::path run = tmp / "run";
  std::string message;
  try {
    train::Trainer(c, run, {}).run();
    FAIL() << "lr 100 without clipping did not diverge in 30 steps";
  } catch (const Error& e) {
    message = e.what();
  }
  ASSERT_TRUE(message.starts_with("non-finite values at step ")) << message;
  const int step = std::atoi(message.c_str() + std::strlen("non-finite values at step "));
  ASSERT_GT(step, 1) << "diverged at step 1, so no good state exists to save: " << message;

  json record;
  for (const auto& j : read_jsonl(run / "metrics.jsonl"))
    if (j.at("type") == "non_finite") record = j;
  ASSERT_TRUE(record.is_object()) << "no non_finite record in metrics.jsonl";
  EXPECT_EQ(record.at("step").get<int>(), step);
  const std::string first = record.at("first").get<std::string>();
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first.starts_with("layers.")) << first;
  EXPECT_TRUE(first.ends_with("(activation)") || first.ends_with("(gradient)") ||
              first.ends_with("(parameter gradient)"))
      << first;
  // The message names the layer (the number after "layers.") and the tensor.
  const std::string layer = first.substr(7, first.find('.', 7) - 7);
  EXPECT_NE(message.find("in layer " + layer + " " + first), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("the last good state (step {}) is saved", step - 1)), std::string::npos)
      << message;
  // Train records go up to the step before.
  int last_train = 0;
  for (const auto& j : read_jsonl(run / "metrics.jsonl"))
    if (j.at("type") == "train") last_train = j.at("step").get<int>();
  EXPECT_EQ(last_train, step - 1);

  // The checkpoint is the state after step − 1: every parameter finite, and it loads and evaluates.
  EXPECT_EQ(json::parse(slurp(run / train::kCheckpointJson)).at("step").get<int>(), step - 1);
  auto m = model::build_model(c.model, c.train.batch_size, c.train.seq_len);
  EXPECT_EQ(train::load_checkpoint(run / train::kCheckpointFile, *m, nullptr), step - 1);
  EXPECT_TRUE(parameters_finite(m->graph));
  const CliResult eval = run_cli({"eval", "--run", run.string(), "--batches", "2"}, tmp.path());
  EXPECT_EQ(eval.exit_code, 0) << eval.out << eval.err;
  EXPECT_NE(eval.out.find(fmt::format("step {}: validation loss", step - 1)), std::string::npos) << eval.out;
}

// A validation loss that is not finite stops the run like a non-finite training step, instead of
// landing in summary.json as null. One step at lr 100 moves every weight of a 6-layer ReZero stack (no
// norm anywhere) to about ±100: the step itself ran on the initial weights, so only the final
// evaluation meets the overflow.
TEST(ProbeGuards, NonFiniteValidationLossStopsTheRun) {
  TempDir tmp;
  const train::RunConfig c =
      tiny_run({{"placement", "rezero"}, {"n_layers", 6}}, {{"lr", 100.0}, {"clip", 0.0}, {"steps", 1}});
  const fs::path run = tmp / "run";
  std::string message;
  try {
    train::Trainer(c, run, {}).run();
    FAIL() << "the evaluation after one step at lr 100 was finite";
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_TRUE(message.starts_with("non-finite validation loss at step 1 (val loss ")) << message;
  EXPECT_NE(message.find(fmt::format("no checkpoint was saved in {} yet", run.string())), std::string::npos) << message;
  EXPECT_NE(message.find("first in layer "), std::string::npos) << message;
  EXPECT_NE(message.find("Lower train.lr"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(run / "summary.json"));
  EXPECT_FALSE(fs::exists(run / train::kCheckpointFile)) << "the diverged state is not saved";

  json record;
  for (const auto& j : read_jsonl(run / "metrics.jsonl")) {
    EXPECT_NE(j.at("type"), "eval") << "no eval record for a non-finite loss: " << j.dump();
    if (j.at("type") == "non_finite") record = j;
  }
  ASSERT_TRUE(record.is_object()) << "no non_finite record in metrics.jsonl";
  EXPECT_EQ(record.at("step").get<int>(), 1);
  EXPECT_TRUE(record.at(normlab::train::field::val_loss).is_null()) << record.dump();  // JSON has no NaN
  EXPECT_TRUE(record.at("first").get<std::string>().starts_with("layers.")) << record.dump();
}

// lr 1e-5: the loss barely moves, so batch-to-batch noise puts some steps' grad-norm z-score above 1
// after the 20-step warm-up (measured: steps 23 and 27, z ≈ 1.9 and 1.5). With spike_skip those
// steps' updates are skipped: the probe's update norms are exactly 0 there, and the model's output
// is the same as after the step before.
TEST(ProbeGuards, FlaggedSpikeSkipsTheUpdate) {
  TempDir tmp;
  const json train_section = {{"lr", 1e-5}, {"steps", 30}, {"spike_z", 1.0}, {"spike_skip", true}, {"probe_every", 1}};
  const train::RunConfig c = tiny_run({{"placement", "pre"}}, train_section);
  train::Trainer(c, tmp / "skip", {}).run();

  std::set<int> spikes;
  for (const auto& j : read_jsonl(tmp / "skip" / "metrics.jsonl"))
    if (j.at("type") == "spike") {
      spikes.insert(j.at("step").get<int>());
      EXPECT_TRUE(j.at("update_skipped").get<bool>()) << j.dump();
      EXPECT_GT(j.at("step").get<int>(), 20) << "no spike can be flagged during the 20-step warm-up";
      EXPECT_TRUE(j.at("loss_z").get<double>() > 1.0 || j.at("grad_norm_z").get<double>() > 1.0) << j.dump();
      for (const char* key : {"loss", "loss_z", "grad_norm", "grad_norm_z"}) EXPECT_TRUE(j.at(key).is_number()) << key;
    }
  ASSERT_FALSE(spikes.empty()) << "no spike was flagged; the test needs a setting that flags one";

  const auto records = read_jsonl(tmp / "skip" / "probes.jsonl");
  const auto updates = family(records, "update"), mu = family(records, "model_update");
  ASSERT_EQ(updates.size(), 30u);
  ASSERT_EQ(mu.size(), 30u);
  for (size_t s = 0; s < 30; ++s) {
    const int step = static_cast<int>(s + 1);
    double total = 0;
    for (const auto& v : updates[s].at("update_norm")) total += v.get<double>();
    if (spikes.contains(step)) {
      EXPECT_EQ(total, 0.0) << "step " << step << " was flagged but its update was applied";
      EXPECT_EQ(mu[s].at("logit_change_rms"), mu[s - 1].at("logit_change_rms")) << "step " << step;
    } else {
      EXPECT_GT(total, 0.0) << "step " << step;
    }
  }

  // Without spike_skip the same first spike is flagged (everything before it is identical), with
  // update_skipped false, and its update is applied.
  json no_skip = train_section;
  no_skip["spike_skip"] = false;
  train::Trainer(tiny_run({{"placement", "pre"}}, no_skip), tmp / "keep", {}).run();
  const int first_spike = *spikes.begin();
  bool seen = false;
  for (const auto& j : read_jsonl(tmp / "keep" / "metrics.jsonl"))
    if (j.at("type") == "spike" && j.at("step").get<int>() == first_spike) {
      seen = true;
      EXPECT_FALSE(j.at("update_skipped").get<bool>());
    }
  EXPECT_TRUE(seen) << "step " << first_spike << " not flagged without spike_skip";
  const auto kept = family(read_jsonl(tmp / "keep" / "probes.jsonl"), "update");
  ASSERT_EQ(kept.size(), 30u);
  double total = 0;
  for (const auto& v : kept[static_cast<size_t>(first_spike - 1)].at("update_norm")) total += v.get<double>();
  EXPECT_GT(total, 0.0);
}

}  // namespace
}  // namespace normlab::probe
