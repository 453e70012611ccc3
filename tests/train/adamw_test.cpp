// AdamW against a hand computation on a two-parameter graph; clipping as a factor that leaves the
// gradient buffers untouched; decay flags of a real model.
#include "train/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "model/transformer.h"
#include "tiny_corpus.h"

namespace normlab::train {
namespace {

namespace eng = normlab::engine;

struct TinyGraph {
  eng::Graph g{eng::DType::f64};
  eng::TensorId w, b;
  TinyGraph() {
    w = g.parameter("w.weight", {2, 3}, eng::Role::fc1, /*weight_decay=*/true);
    b = g.parameter("w.bias", {3}, eng::Role::bias, /*weight_decay=*/false);
    g.plan();
    const double wv[] = {0.5, -1.0, 2.0, 0.0, 0.25, -0.75}, wg[] = {0.1, -0.2, 0.3, 4.0, -0.05, 0.0};
    const double bv[] = {1.0, -2.0, 0.5}, bg[] = {-0.3, 0.6, 1e-3};
    std::memcpy(g.data<double>(w), wv, sizeof wv);
    std::memcpy(g.grad<double>(w), wg, sizeof wg);
    std::memcpy(g.data<double>(b), bv, sizeof bv);
    std::memcpy(g.grad<double>(b), bg, sizeof bg);
  }
  std::vector<double> values(eng::TensorId id) const {
    const double* p = g.data<double>(id);
    return {p, p + g.shape(id).numel()};
  }
  std::vector<double> grads(eng::TensorId id) const {
    const double* p = g.grad<double>(id);
    return {p, p + g.shape(id).numel()};
  }
};

// The documented update for one element, written out independently.
struct Reference {
  double m = 0, v = 0;
  double step(double w, double grad, double c, const AdamWSettings& s, bool decay, int t) {
    const double gi = c * grad;
    m = s.beta1 * m + (1 - s.beta1) * gi;
    v = s.beta2 * v + (1 - s.beta2) * gi * gi;
    const double m_hat = m / (1 - std::pow(s.beta1, t)), v_hat = v / (1 - std::pow(s.beta2, t));
    if (decay) w -= s.lr * s.weight_decay * w;
    return w - s.lr * m_hat / (std::sqrt(v_hat) + s.eps);
  }
};

TEST(TrainAdamW, FirstStepMatchesHandComputation) {
  TinyGraph t;
  AdamW opt(t.g);
  const AdamWSettings s{.lr = 0.1, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.2};
  const double clip = 0.5;
  const auto w0 = t.values(t.w), b0 = t.values(t.b), gw = t.grads(t.w), gb = t.grads(t.b);
  opt.step(s, clip, 1);

  // At t = 1, m̂ = c·g and v̂ = (c·g)², so the Adam step is lr · sign(g) (up to ε), plus decay on w only.
  const auto w1 = t.values(t.w), b1 = t.values(t.b);
  for (size_t i = 0; i < w0.size(); ++i) {
    const double g = clip * gw[i];
    const double expected = w0[i] * (1 - 0.1 * 0.2) - 0.1 * g / (std::abs(g) + 1e-8);
    EXPECT_NEAR(w1[i], expected, 1e-15) << "w[" << i << "]";
    EXPECT_NEAR(opt.first_moment<double>(0)[i], (1 - 0.9) * g, 1e-16);
    EXPECT_NEAR(opt.second_moment<double>(0)[i], (1 - 0.95) * g * g, 1e-16);
  }
  for (size_t i = 0; i < b0.size(); ++i) {
    const double g = clip * gb[i];
    EXPECT_NEAR(b1[i], b0[i] - 0.1 * g / (std::abs(g) + 1e-8), 1e-15) << "b[" << i << "] (no decay on a bias)";
  }
  // w[3] = 0 is not decayed, only stepped; w[5] has a zero gradient, so only decay moves it.
  EXPECT_NEAR(w1[3], -0.1 * 2.0 / (2.0 + 1e-8), 1e-15);
  EXPECT_DOUBLE_EQ(w1[5], -0.75 * (1 - 0.02));

  // Clipping enters as a factor: the gradient buffers are exactly what they were.
  EXPECT_EQ(t.grads(t.w), gw);
  EXPECT_EQ(t.grads(t.b), gb);
}

TEST(TrainAdamW, SeveralStepsMatchTheReferenceWithBiasCorrection) {
  TinyGraph t;
  AdamW opt(t.g);
  const AdamWSettings s{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-6, .weight_decay = 0.1};
  std::vector<Reference> rw(6), rb(3);
  auto w = t.values(t.w), b = t.values(t.b);
  for (int step = 1; step <= 4; ++step) {
    const double c = step == 2 ? 0.25 : 1.0;
    // New gradients each step (the optimizer reads whatever backward left in the buffers).
    double* gw = t.g.grad<double>(t.w);
    double* gb = t.g.grad<double>(t.b);
    for (int i = 0; i < 6; ++i) gw[i] = std::sin(1.0 + i + 3.0 * step);
    for (int i = 0; i < 3; ++i) gb[i] = std::cos(2.0 + i * step);
    for (size_t i = 0; i < 6; ++i) w[i] = rw[i].step(w[i], gw[i], c, s, true, step);
    for (size_t i = 0; i < 3; ++i) b[i] = rb[i].step(b[i], gb[i], c, s, false, step);
    opt.step(s, c, step);
    const auto got_w = t.values(t.w), got_b = t.values(t.b);
    for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(got_w[i], w[i], 1e-14) << "step " << step << " w[" << i << "]";
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got_b[i], b[i], 1e-14) << "step " << step << " b[" << i << "]";
    for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(opt.first_moment<double>(0)[i], rw[i].m, 1e-15);
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(opt.second_moment<double>(1)[i], rb[i].v, 1e-15);
  }
}

TEST(TrainAdamW, GlobalGradNormIsTheL2NormOverAllParameters) {
  TinyGraph t;
  double sum = 0;
  for (double g : t.grads(t.w)) sum += g * g;
  for (double g : t.grads(t.b)) sum += g * g;
  EXPECT_DOUBLE_EQ(global_grad_norm(t.g), std::sqrt(sum));
}

TEST(TrainAdamW, ModelDecaysMatricesAndEmbeddingsOnly) {
  const RunConfig c = testing::tiny_config(1);
  model::ModelConfig mc = c.model;
  mc.vocab_size = 50;
  auto m = model::build_model(mc, 2, 8);
  int decayed = 0, kept = 0;
  for (eng::TensorId id : m->graph.parameters()) {
    const eng::TensorSpec& p = m->graph.spec(id);
    const bool matrix = p.shape.rank >= 2;
    EXPECT_EQ(p.weight_decay, matrix) << p.name << " (" << eng::role_name(p.role) << ", " << p.shape.str() << ")";
    (p.weight_decay ? decayed : kept)++;
  }
  EXPECT_GT(decayed, 0);
  EXPECT_GT(kept, 0);
}

}  // namespace
}  // namespace normlab::train
