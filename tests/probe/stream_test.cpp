// The `stream` probe's mean square E[x²] = E‖x_l‖²/d of the residual stream entering each layer, on
// the cases Xiong et al. 2020 (Lemma 2) solve at initialization: in Pre-LN it grows linearly with
// depth, (1 + l/2) ≤ E‖x_l‖²/d ≤ (1 + 3l/2); in Post-LN every layer input is a LayerNorm output, so
// it is 1. The lemma assumes Xavier init, unit-variance inputs (embedding std 1, no position table)
// and d×d feed-forward matrices; l counts full layers (attention + FFN).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "probe/stats.h"
#include "probe_test_util.h"
#include "train/trainer.h"

namespace normlab::probe {
namespace {

using namespace testing;

constexpr int kLayers = 8;

train::RunConfig xiong_config(const std::string& placement, int d_ff) {
  return tiny_run({{"placement", placement},
                   {"d_model", 128},
                   {"n_heads", 4},
                   {"d_ff", d_ff},
                   {"n_layers", kLayers},
                   {"max_seq_len", 64},
                   {"positions", "rope"},
                   {"bias", false},
                   {"init", {{"scheme", "xavier"}, {"embed_std", 1.0}}}},
                  {{"batch_size", 4}, {"seq_len", 64}, {"steps", 1}, {"eval_batches", 1}});
}

// E‖x_l‖²/d for l = 0..L, the mean of the stream probe's statistic over 3 inits × 2 batches.
std::vector<double> stream_mean_square(train::RunConfig c) {
  const train::Loader loader = make_loader(c);
  std::vector<double> ms(kLayers + 1, 0.0);
  train::Batch batch;
  const int seeds = 3, batches = 2;
  for (int seed = 1; seed <= seeds; ++seed) {
    c.train.seed = static_cast<uint64_t>(seed);
    auto m = fresh_model(c);
    EXPECT_EQ(m->landmarks.layer_inputs.size(), static_cast<size_t>(kLayers + 1));
    for (int b = 0; b < batches; ++b) {
      loader.train_batch(b + 1, 0, batch);
      m->set_batch(batch.tokens.data(), batch.targets.data());
      m->forward(false);
      for (int l = 0; l <= kLayers; ++l)
        ms[static_cast<size_t>(l)] +=
            tensor_stats(m->graph, m->landmarks.layer_inputs[static_cast<size_t>(l)]).mean_square / (seeds * batches);
    }
  }
  return ms;
}

std::string show(const std::vector<double>& v) {
  std::ostringstream out;
  out << "E‖x_l‖²/d for l = 0..L:";
  for (double x : v) out << " " << x;
  return out.str();
}

// With d_ff = d, as in the lemma, the bounds hold at every layer. Measured (3 seeds × 2 batches):
// 1.00 1.58 2.26 3.09 3.94 4.91 5.91 6.91 7.82, i.e. ~0.85 per layer, inside [1/2, 3/2].
TEST(ProbeStream, PreLnMeanSquareGrowsWithinXiongsLemma2RangeAtInit) {
  const std::vector<double> ms = stream_mean_square(xiong_config("pre", 128));
  EXPECT_NEAR(ms[0], 1.0, 0.05) << show(ms);  // the embedding rows: N(0, 1)
  for (int l = 1; l <= kLayers; ++l) {
    EXPECT_GE(ms[static_cast<size_t>(l)], 1.0 + l / 2.0) << "layer " << l << "; " << show(ms);
    EXPECT_LE(ms[static_cast<size_t>(l)], 1.0 + 3.0 * l / 2.0) << "layer " << l << "; " << show(ms);
  }
}

// With the usual d_ff = 4d the exact lower bound fails in the first layers, and that is expected:
// Xavier on the non-square fc1 [512 × 128] draws weights of variance 2/(512 + 128), so the FFN's
// hidden units have variance 0.4 instead of 1, and the FFN (GELU, not the lemma's ReLU) adds less
// than d/2. Measured: 1.00 1.37 1.78 2.32 2.95 3.63 4.30 5.06 5.80, i.e. increments from 0.37
// (layer 1) to 0.76 (layer 7). The structural claim still holds and is what this test checks: the
// mean square grows at every layer, by no more than the lemma's 3/2 per layer, nearly linearly, with
// an average slope inside the lemma's [1/2, 3/2] band, and the upper bound holds everywhere.
TEST(ProbeStream, PreLnMeanSquareGrowsLinearlyWithTheUsualFourTimesWiderFfn) {
  const std::vector<double> ms = stream_mean_square(xiong_config("pre", 512));
  EXPECT_NEAR(ms[0], 1.0, 0.05) << show(ms);
  for (int l = 1; l <= kLayers; ++l) {
    const double step = ms[static_cast<size_t>(l)] - ms[static_cast<size_t>(l - 1)];
    EXPECT_GT(step, 0.25) << "layer " << l << "; " << show(ms);
    EXPECT_LE(step, 1.5) << "layer " << l << "; " << show(ms);
    EXPECT_LE(ms[static_cast<size_t>(l)], 1.0 + 3.0 * l / 2.0) << "layer " << l << "; " << show(ms);
  }
  const double slope = (ms[kLayers] - ms[0]) / kLayers;
  EXPECT_GE(slope, 0.5) << show(ms);
  EXPECT_LE(slope, 1.5) << show(ms);
  // Least-squares line through (l, ms_l): nearly all of the variance is explained by it.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = kLayers + 1;
  for (int l = 0; l <= kLayers; ++l) {
    const double y = ms[static_cast<size_t>(l)];
    sx += l, sy += y, sxx += double(l) * l, sxy += l * y;
  }
  const double b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
  double residual = 0, total = 0;
  for (int l = 0; l <= kLayers; ++l) {
    const double y = ms[static_cast<size_t>(l)];
    residual += (y - a - b * l) * (y - a - b * l);
    total += (y - sy / n) * (y - sy / n);
  }
  EXPECT_GE(1 - residual / total, 0.97) << "R² of a linear fit; " << show(ms);
}

// Post-LN: every layer input after the first (and the stack's output) is the output of a LayerNorm
// with γ = 1, β = 0, whose per-row mean square is v/(v + ε) ≈ 1.
TEST(ProbeStream, PostLnMeanSquareIsOneAfterEveryNormAtInit) {
  const std::vector<double> ms = stream_mean_square(xiong_config("post", 512));
  EXPECT_NEAR(ms[0], 1.0, 0.05) << show(ms);
  for (int l = 1; l <= kLayers; ++l)
    EXPECT_NEAR(ms[static_cast<size_t>(l)], 1.0, 1e-4) << "layer " << l << "; " << show(ms);
}

// The same statistic as the training probe writes it: the `stream` record of step 1 (taken after the
// backward pass, before the first update) equals the landmark statistics of the initialized model
// on step 1's batch.
TEST(ProbeStream, TrainingProbeStreamRecordOfStepOneIsTheInitialStream) {
  TempDir tmp;
  train::RunConfig c = xiong_config("pre", 128);
  c.train.probe_every = 1;
  train::Trainer trainer(c, tmp / "run", {});
  trainer.run();
  const auto records = read_jsonl(tmp / "run" / "probes.jsonl");
  const auto streams = family(records, "stream");
  ASSERT_EQ(streams.size(), 1u);
  const json& s = streams[0];
  ASSERT_EQ(s.at("step").get<int>(), 1);
  ASSERT_EQ(s.at("layer").size(), static_cast<size_t>(kLayers + 1));

  auto m = fresh_model(c);
  train::Batch batch;
  make_loader(c).train_batch(1, 0, batch);
  m->set_batch(batch.tokens.data(), batch.targets.data());
  m->forward(true);
  for (int l = 0; l <= kLayers; ++l) {
    const TensorStats expected = tensor_stats(m->graph, m->landmarks.layer_inputs[static_cast<size_t>(l)]);
    EXPECT_EQ(s["layer"][static_cast<size_t>(l)].get<int>(), l);
    EXPECT_NEAR(s["mean_square"][static_cast<size_t>(l)].get<double>(), expected.mean_square,
                1e-9 * expected.mean_square);
    EXPECT_NEAR(s["rms"][static_cast<size_t>(l)].get<double>(), expected.rms(), 1e-9 * expected.rms());
    EXPECT_NEAR(s["max_abs"][static_cast<size_t>(l)].get<double>(), expected.max_abs, 1e-9 * expected.max_abs);
    EXPECT_GE(s["mean_square"][static_cast<size_t>(l)].get<double>(), 1.0 + l / 2.0 - 0.15) << "layer " << l;
  }
}

}  // namespace
}  // namespace normlab::probe
