// The inference-time approximations (model::InferenceOptions, set on built nodes): top-k sparse attention keeps each
// query's k largest logits (the dense op when k covers every key; the argmax key's value when k = 1; the masked
// gradient checked against finite differences; the cached decoding op agrees with the full op), and sampled norm
// statistics use every s-th feature (every feature when s = 1; a hand-computed row otherwise; no backward).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "gradcheck.h"

namespace normlab::engine {
namespace {

using testing::expect_gradients_match;
using testing::randomize;

constexpr int64_t B = 2, T = 6, D = 8, H = 2;

// Sets slot i[3] (top-k, or the statistics' stride) on every node of kind `op`, as set_inference_options does.
void set_option(Graph& g, OpKind op, int64_t value) {
  for (Node& n : g.nodes_to_adjust())
    if (n.op == op) n.attr.i[3] = value;
}

struct AttentionCase {
  Graph g{DType::f64};
  TensorId q = g.parameter("q", {B, T, D}, Role::none, false), k = g.parameter("k", {B, T, D}, Role::none, false),
           v = g.parameter("v", {B, T, D}, Role::none, false);
  TensorId y;
  AttentionCase(bool causal, int64_t top_k) {
    y = attention(g, "y", q, k, v, H, 0, 0, causal);
    g.plan();
    randomize(g, 11);
    set_option(g, OpKind::attention, top_k);
  }
  std::vector<double> output() {
    g.forward(false);
    return {g.data<double>(y), g.data<double>(y) + B * T * D};
  }
};

TEST(TopKAttention, KeepingEveryKeyIsTheDenseOp) {
  for (bool causal : {true, false}) {
    const std::vector<double> dense = AttentionCase(causal, 0).output();
    EXPECT_EQ(AttentionCase(causal, T).output(), dense);
    EXPECT_NE(AttentionCase(causal, 2).output(), dense);
  }
}

TEST(TopKAttention, OneKeyIsTheValueOfTheLargestLogit) {
  AttentionCase c(false, 1);
  const std::vector<double> y = c.output();
  const double* q = c.g.data<double>(c.q);
  const double* k = c.g.data<double>(c.k);
  const double* v = c.g.data<double>(c.v);
  const int64_t dim = D / H;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        int64_t best = 0;
        double best_logit = -INFINITY;
        for (int64_t j = 0; j < T; ++j) {
          double logit = 0;
          for (int64_t i = 0; i < dim; ++i)
            logit += q[(b * T + t) * D + h * dim + i] * k[(b * T + j) * D + h * dim + i];
          if (logit > best_logit) best_logit = logit, best = j;
        }
        for (int64_t i = 0; i < dim; ++i)
          EXPECT_DOUBLE_EQ(y[static_cast<size_t>((b * T + t) * D + h * dim + i)], v[(b * T + best) * D + h * dim + i]);
      }
}

TEST(TopKAttention, GradientsOfTheKeptKeysMatchFiniteDifferences) {
  for (bool causal : {true, false}) {
    Graph g(DType::f64);
    TensorId q = g.parameter("q", {B, T, D}, Role::none, false), k = g.parameter("k", {B, T, D}, Role::none, false),
             v = g.parameter("v", {B, T, D}, Role::none, false);
    TensorId targets = g.input("targets", Shape{B * T}, DType::i32);
    TensorId loss = cross_entropy(g, "loss", attention(g, "y", q, k, v, H, 0, 0, causal), targets);
    g.plan();
    for (int64_t r = 0; r < B * T; ++r) g.data<int32_t>(targets)[r] = static_cast<int32_t>((r * 7 + 3) % D);
    randomize(g, 42);
    set_option(g, OpKind::attention, 3);
    expect_gradients_match(g, loss);
  }
}

TEST(TopKAttention, TheCachedDecodingOpKeepsTheSameKeys) {
  AttentionCase full(true, 3);
  const std::vector<double> expected = full.output();
  Graph g(DType::f64);
  TensorId q = g.parameter("q", {B, 1, D}, Role::none, false), k = g.parameter("k", {B, 1, D}, Role::none, false),
           v = g.parameter("v", {B, 1, D}, Role::none, false);
  TensorId position = g.input("position", Shape{1}, DType::i32);
  TensorId y = cached_attention(g, "y", q, k, v, position, H, T);
  g.plan();
  set_option(g, OpKind::cached_attention, 3);
  for (int64_t t = 0; t < T; ++t) {
    for (TensorId from : {full.q, full.k, full.v}) {
      const TensorId to = from == full.q ? q : from == full.k ? k : v;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < D; ++i) g.data<double>(to)[b * D + i] = full.g.data<double>(from)[(b * T + t) * D + i];
    }
    *g.data<int32_t>(position) = static_cast<int32_t>(t);
    g.forward(false);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < D; ++i)
        EXPECT_NEAR(g.data<double>(y)[b * D + i], expected[static_cast<size_t>((b * T + t) * D + i)], 1e-14);
  }
}

// One row of LayerNorm or RMSNorm (no gain) with statistics from features 0, s, 2s, ...
std::vector<double> sampled_norm(const double* x, int64_t d, int64_t s, bool layer_norm, double eps) {
  double mean = 0, square = 0, count = 0;
  for (int64_t i = 0; i < d; i += s) mean += x[i], count += 1;
  mean = layer_norm ? mean / count : 0;
  for (int64_t i = 0; i < d; i += s) square += (x[i] - mean) * (x[i] - mean);
  const double r = 1 / std::sqrt(square / count + eps);
  std::vector<double> y(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) y[static_cast<size_t>(i)] = (x[i] - mean) * r;
  return y;
}

TEST(SampledNormStatistics, StrideOneIsTheNormAndLargerStridesSampleTheRow) {
  constexpr int64_t kWidth = 10;
  for (bool layer_norm : {true, false})
    for (int64_t stride : {1, 3}) {
      SCOPED_TRACE(std::string(layer_norm ? "LayerNorm" : "RMSNorm") + " stride " + std::to_string(stride));
      Graph g(DType::f64);
      TensorId x = g.parameter("x", {3, kWidth}, Role::none, false);
      TensorId y =
          layer_norm ? engine::layer_norm(g, "y", x, kNoTensor, kNoTensor, 1e-5) : rms_norm(g, "y", x, kNoTensor, 1e-5);
      g.plan();
      randomize(g, 5);
      set_option(g, layer_norm ? OpKind::layer_norm : OpKind::rms_norm, stride);
      g.forward(false);
      for (int64_t r = 0; r < 3; ++r) {
        const std::vector<double> expected =
            sampled_norm(g.data<double>(x) + r * kWidth, kWidth, stride, layer_norm, 1e-5);
        for (int64_t i = 0; i < kWidth; ++i)
          EXPECT_NEAR(g.data<double>(y)[r * kWidth + i], expected[static_cast<size_t>(i)], 1e-12);
      }
    }
}

TEST(SampledNormStatistics, HaveNoBackward) {
  Graph g(DType::f64);
  TensorId x = g.parameter("x", {B * T, D}, Role::none, false);
  TensorId targets = g.input("targets", Shape{B * T}, DType::i32);
  TensorId loss = cross_entropy(g, "loss", layer_norm(g, "y", x, kNoTensor, kNoTensor, 1e-5), targets);
  g.plan();
  randomize(g, 5);
  set_option(g, OpKind::layer_norm, 2);
  g.forward(true);
  EXPECT_THROW(g.backward(loss), Error);
}

}  // namespace
}  // namespace normlab::engine
