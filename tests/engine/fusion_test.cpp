// Fused pairs (engine/fusion.h): plan() pairs exactly the add → LayerNorm/RMSNorm/CRMSNorm and linear → GELU nodes, the
// fused kernels pass fp64 finite differences, and in fp32 they agree bit for bit with the two ops run one after
// the other (engine.fuse = false).
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "common/rng.h"
#include "engine/ops.h"
#include "gradcheck.h"

namespace normlab::engine {
namespace {

using testing::expect_gradients_match;

// Rows × width = 3·7 × 37: an odd width leaves a remainder after every vector loop.
constexpr int64_t kRows = 21, kWidth = 37;

enum class Pair {
  add_layer_norm,
  add_layer_norm_gain_only,
  add_layer_norm_plain,
  add_rms_norm,
  add_rms_norm_gemma,
  add_rms_norm_plain,
  add_crms_norm,
  linear_gelu,
  linear_gelu_no_bias,
  linear_gelu_centered
};
constexpr Pair kPairs[] = {
    Pair::add_layer_norm,      Pair::add_layer_norm_gain_only, Pair::add_layer_norm_plain, Pair::add_rms_norm,
    Pair::add_rms_norm_gemma,  Pair::add_rms_norm_plain,       Pair::add_crms_norm,        Pair::linear_gelu,
    Pair::linear_gelu_no_bias, Pair::linear_gelu_centered};

OpKind fused_kind(Pair p) {
  if (p <= Pair::add_layer_norm_plain) return OpKind::add_layer_norm;
  if (p <= Pair::add_rms_norm_plain) return OpKind::add_rms_norm;
  return p == Pair::add_crms_norm ? OpKind::add_crms_norm : OpKind::linear_gelu;
}

struct Net {
  TensorId first, second, loss, targets;  // the pair's two outputs
};

// The pair, then out = second + 0.3·first: the first output has another reader after the pair, as the residual
// stream (and, here, a pre-activation) can, so its gradient gathers two contributions before the first node's
// backward hands it on. loss = CE(out).
Net build(Graph& g, Pair p) {
  const Shape shape{3, 7, kWidth};
  Net n;
  TensorId a = g.parameter("a", shape, Role::none, false);
  auto param = [&](const char* name, Shape s, Role role) { return g.parameter(name, s, role, false); };
  if (fused_kind(p) == OpKind::linear_gelu) {
    TensorId w = param("w", {kWidth, kWidth}, Role::fc1);
    TensorId b = p == Pair::linear_gelu_no_bias ? kNoTensor : param("bias", {kWidth}, Role::bias);
    n.first = linear(g, "pre_activation", a, w, b, p == Pair::linear_gelu_centered);
    n.second = gelu(g, "activation", n.first);
  } else {
    n.first = add(g, "sum", a, param("b", shape, Role::none), 0.7, -1.3);
    const bool has_gain = p != Pair::add_layer_norm_plain && p != Pair::add_rms_norm_plain && p != Pair::add_crms_norm;
    TensorId gain = has_gain ? param("gain", {kWidth}, Role::norm_gain) : kNoTensor;
    if (fused_kind(p) == OpKind::add_layer_norm) {
      TensorId bias = p == Pair::add_layer_norm ? param("bias", {kWidth}, Role::norm_bias) : kNoTensor;
      n.second = layer_norm(g, "normed", n.first, gain, bias, 1e-5);
    } else if (p == Pair::add_crms_norm) {
      n.second = crms_norm(g, "normed", n.first, 1e-5);  // non-affine: the gain is unused
    } else {
      n.second = rms_norm(g, "normed", n.first, gain, 1e-5, p == Pair::add_rms_norm_gemma ? 1.0 : 0.0);
    }
  }
  TensorId out = add(g, "out", n.second, scale(g, "first_scaled", n.first, 0.3));
  n.targets = g.input("targets", Shape{kRows}, DType::i32);
  n.loss = cross_entropy(g, "loss", out, n.targets);
  return n;
}

void set_targets(Graph& g, const Net& n) {
  for (int32_t r = 0; r < kRows; ++r) g.data<int32_t>(n.targets)[r] = (r * 5 + 2) % kWidth;
}

TEST(Fusion, PlanPairsTheNodesAndTheFusedKernelsPassFiniteDifferences) {
  for (Pair p : kPairs) {
    SCOPED_TRACE(static_cast<int>(p));
    Graph g(DType::f64);
    const Net n = build(g, p);
    g.plan();
    EXPECT_EQ(g.fused_pairs(), 1);
    const Node& first = g.nodes()[0];
    EXPECT_TRUE(first.fused_with_next);
    EXPECT_EQ(first.fused_op, fused_kind(p));
    set_targets(g, n);
    testing::randomize(g, 11);
    expect_gradients_match(g, n.loss);
  }
}

TEST(Fusion, NodesThatAreNotAdjacentOrNotReadAreLeftAlone) {
  Graph g(DType::f64);
  TensorId a = g.parameter("a", {4, 8}, Role::none, false), b = g.parameter("b", {4, 8}, Role::none, false);
  TensorId sum = add(g, "sum", a, b);
  TensorId other = add(g, "other", a, b);  // between the sum and its norm: the pair is not adjacent
  TensorId normed = layer_norm(g, "normed", sum, kNoTensor, kNoTensor, 1e-5);
  TensorId mixed = add(g, "mixed", other, normed);
  rms_norm(g, "of_mixed", mixed, kNoTensor, 1e-5);  // adjacent and reading it: paired
  gelu(g, "of_a", a);                               // a GELU after a norm, not after a linear map
  g.plan();
  EXPECT_FALSE(g.nodes()[0].fused_with_next);
  EXPECT_FALSE(g.nodes()[1].fused_with_next);
  EXPECT_FALSE(g.nodes()[2].fused_with_next);
  EXPECT_TRUE(g.nodes()[3].fused_with_next);
  EXPECT_FALSE(g.nodes()[4].fused_with_next);
  EXPECT_EQ(g.fused_pairs(), 1);

  Graph off(DType::f64);
  build(off, Pair::add_layer_norm);
  off.set_fusion(false);
  off.plan();
  EXPECT_EQ(off.fused_pairs(), 0);
}

// Every forward output, the first output's gradient and every parameter's gradient, in fp32.
std::vector<double> run(Pair p, bool fuse) {
  Graph g(DType::f32);
  const Net n = build(g, p);
  g.set_fusion(fuse);
  g.plan();
  EXPECT_EQ(g.fused_pairs(), fuse ? 1 : 0);
  set_targets(g, n);
  for (TensorId id : g.parameters()) {
    Rng rng(hash_string(g.spec(id).name, 3));
    float* d = g.data<float>(id);
    for (int64_t i = 0; i < g.shape(id).numel(); ++i) d[i] = static_cast<float>(rng.normal());
  }
  g.zero_param_grads();
  g.forward(true);
  g.backward(n.loss);
  std::vector<double> values;
  auto append = [&](TensorId id, bool grad) {
    for (double v : to_f64(g, id, grad)) values.push_back(v);
  };
  append(n.first, false), append(n.second, false), append(n.loss, false), append(n.first, true);
  for (TensorId id : g.parameters()) append(id, true);
  return values;
}

TEST(Fusion, AgreesBitForBitWithTheUnfusedOps) {
  for (Pair p : kPairs) {
    const std::vector<double> fused = run(p, true), unfused = run(p, false);
    ASSERT_EQ(fused.size(), unfused.size());
    size_t differing = 0;
    for (size_t i = 0; i < fused.size(); ++i) differing += fused[i] != unfused[i];
    EXPECT_EQ(differing, 0u) << "pair " << static_cast<int>(p) << ": of " << fused.size() << " values";
  }
}

}  // namespace
}  // namespace normlab::engine
