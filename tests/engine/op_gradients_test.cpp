// Every op's backward against central finite differences in double precision (rel. error ≤ 1e-6).
// Each case feeds the op's output into a cross-entropy with fixed random targets, so the loss is a
// smooth scalar that depends on every output element, and makes the op's inputs parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "gradcheck.h"

namespace normlab::engine {
namespace {

using testing::expect_gradients_match;
using testing::randomize;

constexpr int64_t B = 2, T = 5, D = 8, H = 2;

struct Case {
  Graph g{DType::f64};
  TensorId targets = kNoTensor;
  int64_t recompute_rows = 0;  // > 0: attention recomputes its probabilities in blocks of this many queries

  TensorId param(const std::string& name, Shape s, Role role = Role::none) { return g.parameter(name, s, role, false); }
  // Loss over an output's rows, each row read as logits over its last axis.
  TensorId finish(TensorId out, double smoothing = 0) {
    const Shape& s = g.shape(out);
    targets = g.input("targets", Shape{s.rows()}, DType::i32);
    TensorId loss = cross_entropy(g, "loss", out, targets, smoothing);
    if (recompute_rows > 0) recompute_attention_probabilities(g, recompute_rows);
    g.plan();
    for (int64_t r = 0; r < s.rows(); ++r) g.data<int32_t>(targets)[r] = static_cast<int32_t>((r * 7 + 3) % s.last());
    randomize(g, 42);
    return loss;
  }
};

TEST(OpGradients, LinearPlainAndCentered) {
  for (bool centered : {false, true})
    for (bool with_bias : {true, false}) {
      Case c;
      TensorId x = c.param("x", {B, T, D});
      TensorId w = c.param("w", {6, D});
      TensorId b = with_bias ? c.param("b", {6}) : kNoTensor;
      expect_gradients_match(c.g, c.finish(linear(c.g, "y", x, w, b, centered)));
    }
}

TEST(Ops, CenteredLinearIsLinearThenCenter) {
  // The folded form (centered W and b) against the explicit one: outputs and every gradient, in fp64.
  Graph g(DType::f64);
  TensorId x = g.parameter("x", {B, T, D}, Role::none, false), w = g.parameter("w", {6, D}, Role::none, false),
           b = g.parameter("b", {6}, Role::none, false);
  TensorId folded = linear(g, "folded", x, w, b, true), explicit_ = center(g, "explicit", linear(g, "plain", x, w, b));
  TensorId targets = g.input("targets", {B * T}, DType::i32);
  TensorId loss_folded = cross_entropy(g, "loss_folded", folded, targets),
           loss_explicit = cross_entropy(g, "loss_explicit", explicit_, targets);
  g.plan();
  randomize(g, 5);
  for (int64_t r = 0; r < B * T; ++r) g.data<int32_t>(targets)[r] = static_cast<int32_t>(r % 6);
  g.forward(false);
  for (int64_t i = 0; i < B * T * 6; ++i) EXPECT_NEAR(g.data<double>(folded)[i], g.data<double>(explicit_)[i], 1e-14);
  std::vector<std::vector<double>> grads;
  for (TensorId loss : {loss_folded, loss_explicit}) {
    g.zero_param_grads();
    g.backward(loss);
    std::vector<double> all;
    for (TensorId p : {x, w, b})
      for (double v : to_f64(g, p, true)) all.push_back(v);
    grads.push_back(all);
  }
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_NEAR(grads[0][i], grads[1][i], 1e-14) << i;
}

TEST(OpGradients, LayerNormAffineBiasFreeAndPlain) {
  for (int variant = 0; variant < 3; ++variant) {
    Case c;
    TensorId x = c.param("x", {B, T, D});
    TensorId gain = variant < 2 ? c.param("gain", {D}, Role::norm_gain) : kNoTensor;
    TensorId bias = variant == 0 ? c.param("bias", {D}) : kNoTensor;
    expect_gradients_match(c.g, c.finish(layer_norm(c.g, "y", x, gain, bias, 1e-3)));
  }
}

TEST(OpGradients, RmsNormPlainGemmaAndNonAffine) {
  for (int variant = 0; variant < 3; ++variant) {
    Case c;
    TensorId x = c.param("x", {B, T, D});
    TensorId gain = variant < 2 ? c.param("gain", {D}, Role::norm_gain) : kNoTensor;
    expect_gradients_match(c.g, c.finish(rms_norm(c.g, "y", x, gain, 1e-3, variant == 1 ? 1.0 : 0.0)));
  }
}

TEST(OpGradients, Embedding) {
  Case c;
  TensorId ids = c.g.input("ids", {B, T}, DType::i32);
  TensorId table = c.param("table", {7, D});
  TensorId loss = c.finish(embedding(c.g, "y", ids, table));
  for (int64_t i = 0; i < B * T; ++i) c.g.data<int32_t>(ids)[i] = static_cast<int32_t>((i * 3) % 5);  // repeats ids
  expect_gradients_match(c.g, loss);
}

TEST(OpGradients, PositionAdd) {
  Case c;
  TensorId x = c.param("x", {B, T, D});
  TensorId pos = c.param("pos", {T + 3, D});
  expect_gradients_match(c.g, c.finish(position_add(c.g, "y", x, pos)));
}

TEST(OpGradients, AddScaleGelu) {
  Case c;
  TensorId a = c.param("a", {B, T, D});
  TensorId b = c.param("b", {B, T, D});
  TensorId y = gelu(c.g, "gelu", scale(c.g, "scaled", add(c.g, "sum", a, b, 0.7, -1.3), 1.9));
  expect_gradients_match(c.g, c.finish(y));
}

TEST(OpGradients, GeluTanhAndRelu) {
  Case c;
  TensorId a = c.param("a", {B, T, D});
  TensorId b = c.param("b", {B, T, D});
  // ReLU's kink within h = 1e-5 of a pre-activation would spoil the central difference; these draws have none.
  TensorId y = add(c.g, "y", gelu_tanh(c.g, "gelu_tanh", a), relu(c.g, "relu", scale(c.g, "scaled", b, 1.9)));
  expect_gradients_match(c.g, c.finish(y));
}

TEST(Ops, ReluPassesTheGradientOnlyWherePositive) {
  Graph g(DType::f64);
  TensorId x = g.parameter("x", Shape{4}, Role::none, false);
  TensorId y = relu(g, "y", x);
  g.plan();
  const double in[] = {-1.5, 0.0, 2.0, 1e-300};
  std::copy(std::begin(in), std::end(in), g.data<double>(x));
  g.forward(false);
  EXPECT_EQ(std::vector<double>(g.data<double>(y), g.data<double>(y) + 4), (std::vector<double>{0, 0, 2.0, 1e-300}));
  std::fill_n(g.grad<double>(y), 4, 3.0);
  std::fill_n(g.grad<double>(x), 4, 0.0);
  op_def(OpKind::relu).kernels.backward(g, g.nodes()[0]);
  EXPECT_EQ(std::vector<double>(g.grad<double>(x), g.grad<double>(x) + 4), (std::vector<double>{0, 0, 3, 3}))
      << "torch's convention: no gradient at 0";
}

TEST(OpGradients, SinusoidAddPassesTheGradientThrough) {
  Case c;
  TensorId x = c.param("x", {B, T, D});
  expect_gradients_match(c.g, c.finish(sinusoid_add(c.g, "y", x)));
}

// PE[p, 2i] = sin(p / 10000^(2i/w)), PE[p, 2i+1] = cos(…) (Vaswani et al. §3.5), an odd width ending with a sine; a
// chunk starting at position o (decoding) adds rows o.. of the same table.
TEST(Ops, SinusoidAddAddsVaswanisTable) {
  for (int64_t width : {6, 7}) {
    Graph g(DType::f64);
    TensorId x = g.input("x", Shape{2, 3, width}, DType::f64);
    TensorId offset = g.input("offset", Shape{1}, DType::i32);
    TensorId full = sinusoid_add(g, "full", x), chunk = sinusoid_add(g, "chunk", x, offset);
    g.plan();
    for (int64_t i = 0; i < 2 * 3 * width; ++i) g.data<double>(x)[i] = 0.25 * static_cast<double>(i % 5);
    *g.data<int32_t>(offset) = 4;
    g.forward(false);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 3; ++t)
        for (int64_t j = 0; j < width; ++j) {
          const int64_t at = (b * 3 + t) * width + j;
          const auto pe = [&](int64_t p) {
            const double angle = static_cast<double>(p) / std::pow(10000.0, static_cast<double>(2 * (j / 2)) / width);
            return j % 2 == 0 ? std::sin(angle) : std::cos(angle);
          };
          EXPECT_DOUBLE_EQ(g.data<double>(full)[at], g.data<double>(x)[at] + pe(t)) << width << " " << at;
          EXPECT_DOUBLE_EQ(g.data<double>(chunk)[at], g.data<double>(x)[at] + pe(4 + t)) << width << " " << at;
        }
  }
}

TEST(OpGradients, Swiglu) {
  Case c;
  TensorId a = c.param("a", {B, T, D});
  TensorId u = c.param("u", {B, T, D});
  expect_gradients_match(c.g, c.finish(swiglu(c.g, "y", a, u)));
}

// Cross-attention of a decoding step: fewer queries than keys (3 of T), padded keys, with and without a soft-cap.
TEST(OpGradients, AttentionOfFewerQueriesThanKeys) {
  for (double softcap : {0.0, 2.0}) {
    Case c;
    TensorId q = c.param("q", {B, 3, D}), k = c.param("k", {B, T, D}), v = c.param("v", {B, T, D});
    TensorId lengths = c.g.input("lengths", Shape{B}, DType::i32);
    TensorId loss = c.finish(attention(c.g, "y", q, k, v, H, 0, softcap, false, lengths));
    c.g.data<int32_t>(lengths)[0] = 4;
    c.g.data<int32_t>(lengths)[1] = T;
    expect_gradients_match(c.g, loss);
  }
}

// The attention cases above with recomputed probabilities (engine.recompute_attention), in blocks of 2 queries: T = 5
// gives blocks of 2, 2 and 1, and a causal block skips the keys after its last row.
struct AttentionSetup {
  int64_t queries;
  bool causal;
  double scale, softcap;
  bool padded;  // batch row 0 sees 3 keys of T
};
const AttentionSetup kAttentionSetups[] = {
    {T, true, 0, 0, false}, {T, true, 0, 0, true},    {T, false, 0, 2.0, false},
    {T, false, 0, 0, true}, {3, false, 0, 2.0, true}, {T, true, 1.7, 2.0, false},
};
std::string describe(const AttentionSetup& s) {
  return "queries " + std::to_string(s.queries) + (s.causal ? " causal" : " bidirectional") + " scale " +
         std::to_string(s.scale) + " softcap " + std::to_string(s.softcap) + (s.padded ? " padded" : "");
}
// q, k, v and the attention node of `s` in c's graph, planned and randomized; returns the loss.
TensorId attention_case(Case& c, const AttentionSetup& s) {
  TensorId q = c.param("q", {B, s.queries, D}), k = c.param("k", {B, T, D}), v = c.param("v", {B, T, D});
  TensorId lengths = s.padded ? c.g.input("lengths", Shape{B}, DType::i32) : kNoTensor;
  TensorId loss = c.finish(attention(c.g, "y", q, k, v, H, s.scale, s.softcap, s.causal, lengths));
  if (s.padded) c.g.data<int32_t>(lengths)[0] = 3, c.g.data<int32_t>(lengths)[1] = T;
  return loss;
}

TEST(OpGradients, AttentionRecomputingItsProbabilitiesInBlocks) {
  for (const AttentionSetup& s : kAttentionSetups) {
    SCOPED_TRACE(describe(s));
    Case c;
    c.recompute_rows = 2;
    const TensorId loss = attention_case(c, s);
    EXPECT_EQ(c.g.shape(c.g.at("y.probs")).numel(), 0) << "the probabilities are still saved";
    expect_gradients_match(c.g, loss);
  }
}

// The two paths compute the same function: outputs and every gradient agree to fp64 rounding.
TEST(Ops, RecomputedAttentionEqualsSavedAttention) {
  for (const AttentionSetup& s : kAttentionSetups)
    for (int64_t rows : {1, 2, 64}) {
      SCOPED_TRACE(describe(s) + ", blocks of " + std::to_string(rows));
      Case saved, recomputed;
      recomputed.recompute_rows = rows;
      const TensorId loss_saved = attention_case(saved, s), loss_recomputed = attention_case(recomputed, s);
      for (Case* c : {&saved, &recomputed}) {
        c->g.zero_param_grads();
        c->g.forward(true);
        c->g.backward(c == &saved ? loss_saved : loss_recomputed);
      }
      const TensorId y = saved.g.at("y");
      for (int64_t i = 0; i < saved.g.shape(y).numel(); ++i)
        EXPECT_NEAR(saved.g.data<double>(y)[i], recomputed.g.data<double>(recomputed.g.at("y"))[i], 1e-13);
      for (const char* name : {"q", "k", "v"}) {
        const TensorId a = saved.g.at(name), b = recomputed.g.at(name);
        for (int64_t i = 0; i < saved.g.shape(a).numel(); ++i)
          EXPECT_NEAR(saved.g.grad<double>(a)[i], recomputed.g.grad<double>(b)[i], 1e-13) << name << "[" << i << "]";
      }
    }
}

TEST(OpGradients, Rope) {
  Case c;
  TensorId x = c.param("x", {B, T, D});
  expect_gradients_match(c.g, c.finish(rope(c.g, "y", x, H, 10000.0)));
}

TEST(OpGradients, CausalAttention) {
  Case c;
  TensorId q = c.param("q", {B, T, D}), k = c.param("k", {B, T, D}), v = c.param("v", {B, T, D});
  expect_gradients_match(c.g, c.finish(attention(c.g, "y", q, k, v, H)));
}

TEST(OpGradients, BidirectionalAttention) {
  for (double softcap : {0.0, 2.0}) {
    Case c;
    TensorId q = c.param("q", {B, T, D}), k = c.param("k", {B, T, D}), v = c.param("v", {B, T, D});
    expect_gradients_match(c.g, c.finish(attention(c.g, "y", q, k, v, H, 0, softcap, false)));
  }
}

// Padded keys (an encoder-decoder's source): batch row 0 has 3 real keys of T, row 1 all T.
TEST(OpGradients, AttentionWithKeyLengths) {
  for (bool causal : {false, true}) {
    Case c;
    TensorId q = c.param("q", {B, T, D}), k = c.param("k", {B, T, D}), v = c.param("v", {B, T, D});
    TensorId lengths = c.g.input("lengths", Shape{B}, DType::i32);
    TensorId loss = c.finish(attention(c.g, "y", q, k, v, H, 0, 0, causal, lengths));
    c.g.data<int32_t>(lengths)[0] = 3;
    c.g.data<int32_t>(lengths)[1] = T;
    expect_gradients_match(c.g, loss);
    // A padded key and value get no gradient.
    for (int64_t t = 3; t < T; ++t)
      for (int64_t i = 0; i < D; ++i) {
        EXPECT_EQ(c.g.grad<double>(k)[t * D + i], 0.0);
        EXPECT_EQ(c.g.grad<double>(v)[t * D + i], 0.0);
      }
  }
}

TEST(OpGradients, DropoutUsesTheSameMaskForward) {
  Case c;
  TensorId x = c.param("x", {B, T, D});
  expect_gradients_match(c.g, c.finish(dropout(c.g, "y", x, 0.3)));
}

TEST(OpGradients, CrossEntropyIsTheLossOfEveryCase) {
  Case c;
  TensorId logits = c.param("logits", {B * T, 11});
  expect_gradients_match(c.g, c.finish(logits));
}

TEST(OpGradients, CrossEntropySkipsRowsWithoutATarget) {
  Case c;
  TensorId logits = c.param("logits", {B * T, 11});
  TensorId loss = c.finish(logits);
  int32_t* targets = c.g.data<int32_t>(c.targets);
  for (int64_t r = 0; r < B * T; r += 3) targets[r] = -1;  // a masked LM's unpredicted tokens
  expect_gradients_match(c.g, loss);
  // The mean runs over the rows that count, and the others get no gradient.
  c.g.zero_param_grads();
  const double value = (c.g.forward(false), *c.g.data<double>(loss));
  c.g.backward(loss);
  double sum = 0;
  int counted = 0;
  for (int64_t r = 0; r < B * T; ++r) {
    const double* z = c.g.data<double>(logits) + r * 11;
    double lse = 0;
    for (int j = 0; j < 11; ++j) lse += std::exp(z[j]);
    if (targets[r] >= 0) sum += std::log(lse) - z[targets[r]], ++counted;
    else
      for (int j = 0; j < 11; ++j) EXPECT_EQ(c.g.grad<double>(logits)[r * 11 + j], 0.0);
  }
  EXPECT_NEAR(value, sum / counted, 1e-12);
  // No row counts: the loss is 0 and nothing flows back.
  for (int64_t r = 0; r < B * T; ++r) targets[r] = -1;
  c.g.zero_param_grads();
  c.g.forward(false);
  EXPECT_EQ(*c.g.data<double>(loss), 0.0);
  c.g.backward(loss);
  for (int64_t i = 0; i < B * T * 11; ++i) EXPECT_EQ(c.g.grad<double>(logits)[i], 0.0);
}

TEST(OpGradients, CrossEntropyWithLabelSmoothing) {
  constexpr double eps = 0.1;
  constexpr int V = 11;
  Case c;
  TensorId logits = c.param("logits", {B * T, V});
  TensorId loss = c.finish(logits, eps);
  c.g.data<int32_t>(c.targets)[4] = -1;
  expect_gradients_match(c.g, loss);
  // The value is the cross-entropy against (1 − ε)·one-hot + ε/V, written out.
  c.g.forward(false);
  double sum = 0;
  int counted = 0;
  for (int64_t r = 0; r < B * T; ++r) {
    const int32_t t = c.g.data<int32_t>(c.targets)[r];
    if (t < 0) continue;
    const double* z = c.g.data<double>(logits) + r * V;
    double lse = 0;
    for (int j = 0; j < V; ++j) lse += std::exp(z[j]);
    lse = std::log(lse);
    for (int j = 0; j < V; ++j) sum -= ((j == t ? 1 - eps : 0) + eps / V) * (z[j] - lse);
    ++counted;
  }
  EXPECT_NEAR(*c.g.data<double>(loss), sum / counted, 1e-12);
}

TEST(OpGradients, AttentionWithScaleAndSoftcap) {
  Case c;
  TensorId q = c.param("q", {B, T, D}), k = c.param("k", {B, T, D}), v = c.param("v", {B, T, D});
  expect_gradients_match(c.g, c.finish(attention(c.g, "y", q, k, v, H, 1.7, 2.0)));
}

TEST(OpGradients, Geglu) {
  Case c;
  TensorId a = c.param("a", {B, T, D});
  TensorId u = c.param("u", {B, T, D});
  expect_gradients_match(c.g, c.finish(geglu(c.g, "y", a, u)));
}

TEST(OpGradients, GegluTanh) {
  Case c;
  TensorId a = c.param("a", {B, T, D});
  TensorId u = c.param("u", {B, T, D});
  expect_gradients_match(c.g, c.finish(geglu_tanh(c.g, "y", a, u)));
}

TEST(OpGradients, ScaleAddEveryMode) {
  Case c;
  TensorId a = c.param("a", {B, T, D}), b = c.param("b", {B, T, D});
  TensorId scalars = c.param("scalars", {3, 3}), vec = c.param("vec", {D}), heads = c.param("heads", {H});
  TensorId y = scale_add(c.g, "y1", a, b, scalars, ScaleMode::scalar, 4);
  y = scale_add(c.g, "y2", y, b, vec, ScaleMode::vector);
  y = scale_add(c.g, "y3", kNoTensor, y, heads, ScaleMode::heads);
  expect_gradients_match(c.g, c.finish(y));
}

TEST(OpGradients, GpasGateAndItsIdentityInputGradient) {
  Case c;
  TensorId x = c.param("x", {B, T, D}), gate = c.param("gate", {1});
  TensorId loss = c.finish(gpas(c.g, "y", x, gate));
  // The check must use the stop-gradient semantics: FD on x sees (1 − SiLU(a)), the analytic
  // gradient passes g through unscaled. So x is compared by hand and only the gate by FD here.
  c.g.zero_param_grads();
  c.g.forward(true);
  c.g.backward(loss);
  const double a = *c.g.data<double>(gate), silu = a / (1 + std::exp(-a));
  // Forward value is (1 − SiLU(a))·x.
  EXPECT_NEAR(c.g.data<double>(c.g.at("y"))[5], (1 - silu) * c.g.data<double>(x)[5], 1e-14);
  // dL/dx equals dL/dy exactly.
  for (int64_t i = 0; i < B * T * D; ++i) EXPECT_EQ(c.g.grad<double>(x)[i], c.g.grad<double>(c.g.at("y"))[i]);
  // dL/da by finite differences.
  const double h = 1e-6, analytic = *c.g.grad<double>(gate);
  *c.g.data<double>(gate) = a + h;
  const double up = testing::loss_of(c.g, loss);
  *c.g.data<double>(gate) = a - h;
  const double down = testing::loss_of(c.g, loss);
  EXPECT_NEAR(analytic, (up - down) / (2 * h), 1e-6 * std::abs(analytic));
}

TEST(OpGradients, DytWithAndWithoutBias) {
  for (bool with_bias : {true, false}) {
    Case c;
    TensorId x = c.param("x", {B, T, D}), alpha = c.param("alpha", {1});
    TensorId gain = c.param("gain", {D}, Role::norm_gain), bias = with_bias ? c.param("bias", {D}) : kNoTensor;
    expect_gradients_match(c.g, c.finish(dyt(c.g, "y", x, alpha, gain, bias)));
  }
}

TEST(OpGradients, ScaleNormAndL2Norm) {
  for (bool with_gain : {true, false}) {
    Case c;
    TensorId x = c.param("x", {B, T, D});
    TensorId gain = with_gain ? c.param("gain", {1}) : kNoTensor;
    expect_gradients_match(c.g, c.finish(scale_norm(c.g, "y", x, gain, 1e-5)));
  }
}

TEST(OpGradients, CrmsNorm) {
  Case c;
  TensorId x = c.param("x", {B, T, D - 1});
  expect_gradients_match(c.g, c.finish(crms_norm(c.g, "y", x, 1e-3)));
}

TEST(OpGradients, CenterSoftcapPbRelax) {
  Case c;
  TensorId x = c.param("x", {B, T, D});
  TensorId y = softcap(c.g, "capped", center(c.g, "centered", x), 0.8);
  y = layer_norm(c.g, "ln", pb_relax(c.g, "relaxed", y), kNoTensor, kNoTensor, 1e-5);
  expect_gradients_match(c.g, c.finish(y));
}

TEST(Ops, CrmsNormOfCompressedVectorEqualsRmsNormOfFullVector) {
  // z zero-mean in R^D, x = z without its last coordinate: CRMS(x) = RMSNorm(z)[0..D-2].
  Graph g(DType::f64);
  TensorId z = g.parameter("z", {1, D}, Role::none, false), x = g.parameter("x", {1, D - 1}, Role::none, false);
  TensorId full = rms_norm(g, "full", z, kNoTensor, 1e-5), compressed = crms_norm(g, "compressed", x, 1e-5);
  g.plan();
  double sum = 0;
  for (int64_t i = 0; i < D - 1; ++i) sum += (g.data<double>(z)[i] = g.data<double>(x)[i] = 0.3 * i - 0.7);
  g.data<double>(z)[D - 1] = -sum;
  g.forward(false);
  for (int64_t i = 0; i < D - 1; ++i) EXPECT_NEAR(g.data<double>(full)[i], g.data<double>(compressed)[i], 1e-14);
}

TEST(Ops, AttentionIsCausal) {
  // Changing a later token's key or value must not change an earlier output row.
  Graph g(DType::f64);
  TensorId q = g.parameter("q", {1, T, D}, Role::none, false), k = g.parameter("k", {1, T, D}, Role::none, false),
           v = g.parameter("v", {1, T, D}, Role::none, false);
  TensorId y = attention(g, "y", q, k, v, H);
  g.plan();
  randomize(g, 3);
  g.forward(false);
  std::vector<double> before(g.data<double>(y), g.data<double>(y) + T * D);
  g.data<double>(k)[(T - 1) * D] += 5.0;
  g.data<double>(v)[(T - 1) * D + 1] += 5.0;
  g.forward(false);
  for (int64_t i = 0; i < (T - 1) * D; ++i) EXPECT_EQ(before[static_cast<size_t>(i)], g.data<double>(y)[i]);
  EXPECT_NE(before[static_cast<size_t>((T - 1) * D + 1)], g.data<double>(y)[(T - 1) * D + 1]);
}

TEST(Ops, BidirectionalAttentionSeesLaterTokens) {
  // The same change of the last token's key and value reaches every output row once the mask is off.
  Graph g(DType::f64);
  TensorId q = g.parameter("q", {1, T, D}, Role::none, false), k = g.parameter("k", {1, T, D}, Role::none, false),
           v = g.parameter("v", {1, T, D}, Role::none, false);
  TensorId y = attention(g, "y", q, k, v, H, 0, 0, false);
  g.plan();
  randomize(g, 3);
  g.forward(false);
  std::vector<double> before(g.data<double>(y), g.data<double>(y) + T * D);
  g.data<double>(v)[(T - 1) * D + 1] += 5.0;
  g.forward(false);
  for (int64_t t = 0; t < T; ++t) EXPECT_NE(before[static_cast<size_t>(t * D + 1)], g.data<double>(y)[t * D + 1]);
}

TEST(Ops, AttentionIgnoresPaddedKeys) {
  // Row 0 has 3 real keys: its padded keys and values reach no output; a real one reaches every query.
  Graph g(DType::f64);
  TensorId q = g.parameter("q", {B, T, D}, Role::none, false), k = g.parameter("k", {B, T, D}, Role::none, false),
           v = g.parameter("v", {B, T, D}, Role::none, false);
  TensorId lengths = g.input("lengths", Shape{B}, DType::i32);
  TensorId y = attention(g, "y", q, k, v, H, 0, 0, false, lengths);
  g.plan();
  randomize(g, 3);
  g.data<int32_t>(lengths)[0] = 3;
  g.data<int32_t>(lengths)[1] = T;
  g.forward(false);
  std::vector<double> before(g.data<double>(y), g.data<double>(y) + B * T * D);
  for (int64_t i = 3 * D; i < T * D; ++i) g.data<double>(k)[i] += 5.0, g.data<double>(v)[i] -= 5.0;
  g.forward(false);
  for (int64_t i = 0; i < B * T * D; ++i) EXPECT_EQ(before[static_cast<size_t>(i)], g.data<double>(y)[i]);
  g.data<double>(v)[2 * D + 1] += 5.0;
  g.forward(false);
  for (int64_t t = 0; t < T; ++t) EXPECT_NE(before[static_cast<size_t>(t * D + 1)], g.data<double>(y)[t * D + 1]);
}

TEST(Ops, LayerNormOutputHasZeroMeanUnitVariance) {
  Graph g(DType::f64);
  TensorId x = g.parameter("x", {3, D}, Role::none, false);
  TensorId y = layer_norm(g, "y", x, kNoTensor, kNoTensor, 0.0);
  g.plan();
  randomize(g, 9, 3.0);
  g.forward(false);
  for (int64_t r = 0; r < 3; ++r) {
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < D; ++i) mean += g.data<double>(y)[r * D + i] / D;
    for (int64_t i = 0; i < D; ++i) sq += std::pow(g.data<double>(y)[r * D + i] - mean, 2) / D;
    EXPECT_NEAR(mean, 0.0, 1e-12);
    EXPECT_NEAR(sq, 1.0, 1e-12);
  }
}

}  // namespace
}  // namespace normlab::engine
