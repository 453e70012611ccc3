// Each placement's init rule realizes its paper's (or code's) distribution: T-Fixup, Lipschitz,
// SmallInit (ScaleNorm), Sub-LN γ, HybridNorm's σ, Admin's ω (closed form and profiled), DLCL's row
// averages, Sandwich's scaled outputs, DeepNorm's α/β table and Xavier-normal gain β, and the
// constants other placements start their scalars at. Statistical checks use d = 256 matrices
// (65k entries: the sample std is within ~0.3% of the true one; the tolerance is 3%).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/ops.h"
#include "model/init.h"
#include "model/placement.h"
#include "model/placements/deepnorm.h"
#include "model/transformer.h"

namespace normlab::model {
namespace {

namespace eng = normlab::engine;
using eng::Role;

Json big(const std::string& placement, int layers, const Json& extra = Json::object()) {
  Json j{{"vocab_size", 256}, {"d_model", 256},    {"n_heads", 4},          {"n_layers", layers},
         {"d_ff", 1024},      {"max_seq_len", 64}, {"placement", placement}};
  j.merge_patch(extra);
  return j;
}

Json tiny(const std::string& placement, int layers, const Json& extra = Json::object()) {
  Json j{{"vocab_size", 17}, {"d_model", 16},    {"n_heads", 2},          {"n_layers", layers},
         {"d_ff", 24},       {"max_seq_len", 8}, {"placement", placement}};
  j.merge_patch(extra);
  return j;
}

std::unique_ptr<Model> initialized(const Json& config, uint64_t seed = 5, eng::DType dtype = eng::DType::f32) {
  auto m = build_model(read_model_config(config, "init rules"), 1, 8, dtype);
  initialize(*m, seed);
  return m;
}

std::vector<double> values(const Model& m, const std::string& name) { return eng::to_f64(m.graph, m.graph.at(name)); }

struct Moments {
  double mean = 0, std = 0, max_abs = 0, kurtosis = 0;
  size_t n = 0;
};

Moments moments(const std::vector<double>& v) {
  Moments s;
  s.n = v.size();
  for (double x : v) s.mean += x / static_cast<double>(v.size()), s.max_abs = std::max(s.max_abs, std::abs(x));
  double m2 = 0, m4 = 0;
  for (double x : v) {
    const double d = x - s.mean;
    m2 += d * d / static_cast<double>(v.size());
    m4 += d * d * d * d / static_cast<double>(v.size());
  }
  s.std = std::sqrt(m2);
  s.kurtosis = m4 / (m2 * m2);
  return s;
}

// N(0, std): sample std within 3%, mean within 4 standard errors, Gaussian kurtosis (3; uniform is 1.8).
void expect_normal(const Model& m, const std::string& name, double std) {
  const Moments s = moments(values(m, name));
  EXPECT_NEAR(s.std / std, 1.0, 0.03) << name << ": std " << s.std << ", want " << std;
  EXPECT_LE(std::abs(s.mean), 4 * std / std::sqrt(static_cast<double>(s.n))) << name << ": mean " << s.mean;
  EXPECT_NEAR(s.kurtosis, 3.0, 0.3) << name << ": not Gaussian";
}

// U(−bound, bound): never beyond the bound, reaching close to it, std bound/√3, kurtosis 1.8.
void expect_uniform(const Model& m, const std::string& name, double bound) {
  const Moments s = moments(values(m, name));
  EXPECT_LE(s.max_abs, bound * (1 + 1e-6)) << name << ": beyond the bound " << bound;
  EXPECT_GE(s.max_abs, 0.99 * bound) << name << ": does not fill U(±" << bound << ")";
  EXPECT_NEAR(s.std / (bound / std::sqrt(3.0)), 1.0, 0.03) << name << ": std " << s.std;
  EXPECT_NEAR(s.kurtosis, 1.8, 0.1) << name << ": not uniform";
}

// N(0, σ²) truncated at ±3σ: never beyond 3σ, reaching close to it, variance 0.9733σ², kurtosis 2.829.
constexpr double kTruncatedVariance = 0.9733369246625415, kTruncatedKurtosis = 2.8288855636022556;
void expect_truncated_normal(const Model& m, const std::string& name, double sigma) {
  const Moments s = moments(values(m, name));
  EXPECT_LE(s.max_abs, 3 * sigma * (1 + 1e-6)) << name << ": beyond ±3σ, σ = " << sigma;
  EXPECT_GE(s.max_abs, 2.8 * sigma) << name << ": does not reach near 3σ";
  EXPECT_NEAR(s.std / (sigma * std::sqrt(kTruncatedVariance)), 1.0, 0.03) << name << ": std " << s.std;
  EXPECT_LE(std::abs(s.mean), 4 * sigma / std::sqrt(static_cast<double>(s.n))) << name << ": mean " << s.mean;
  EXPECT_NEAR(s.kurtosis, kTruncatedKurtosis, 0.15) << name << ": not a ±3σ-truncated normal";
}

void expect_all(const Model& m, const std::string& name, double value, double tol = 0) {
  for (double v : values(m, name)) EXPECT_NEAR(v, value, tol) << name;
}

// ---------------------------------------------------------------------------------------------

// The sampler itself, on 10⁶ draws: the moments of N(0, 1) truncated at ±3 (variance
// 1 − 6φ(3)/(2Φ(3) − 1) = 0.97334, kurtosis 2.8289; standard errors ~0.0014 and ~0.005), nothing beyond
// ±3, and (unlike clipping) no mass piled up at the bounds.
TEST(InitRules, TruncatedNormalHasTheMomentsOfATruncatedNormal) {
  Rng rng(42);
  const int n = 1000000;
  std::vector<double> z(n);
  for (double& v : z) v = truncated_normal(rng);
  double mean = 0, m2 = 0, m4 = 0, max_abs = 0;
  int at_bound = 0;
  for (double v : z) mean += v / n, max_abs = std::max(max_abs, std::abs(v)), at_bound += std::abs(v) > 2.999;
  for (double v : z) m2 += (v - mean) * (v - mean) / n, m4 += std::pow(v - mean, 4) / n;
  EXPECT_LE(max_abs, 3.0);
  EXPECT_NEAR(mean, 0, 0.005);
  EXPECT_NEAR(m2, kTruncatedVariance, 0.006);
  EXPECT_NEAR(m4 / (m2 * m2), kTruncatedKurtosis, 0.03);
  EXPECT_LT(at_bound, 20) << "clipped, not truncated: mass at ±3";  // truncated: ~9 expected
  Rng wide(7);
  for (int i = 0; i < 1000; ++i) EXPECT_LE(std::abs(truncated_normal(wide, 1.0)), 1.0);
}

TEST(InitRules, OlmoTwoTruncatedNormalEverywhere) {
  auto m = initialized(big("olmo2", 2, {{"tied_embeddings", false}}));
  for (const char* p : {"attn.q", "attn.k", "attn.v", "attn.o", "ffn.fc1", "ffn.gate", "ffn.fc2"})
    expect_truncated_normal(*m, fmt::format("layers.1.{}.weight", p), 0.02);  // no depth scaling
  expect_truncated_normal(*m, "embed.tokens.weight", 0.02);
  expect_truncated_normal(*m, "lm_head.weight", 0.02);
  expect_all(*m, "layers.1.attn.out_norm.weight", 1);
}

TEST(InitRules, TFixupXavierThenDepthFactorAndScaledEmbeddings) {
  const int L = 6;
  auto m = initialized(big("tfixup", L, {{"tied_embeddings", false}}));
  const double factor = std::pow(9.0 * L, -0.25);
  const double square = std::sqrt(6.0 / 512), wide = std::sqrt(6.0 / 1280), head = std::sqrt(6.0 / 512);
  for (int i : {0, L - 1}) {
    const std::string a = fmt::format("layers.{}.attn", i), f = fmt::format("layers.{}.ffn", i);
    expect_uniform(*m, a + ".q.weight", square);  // Q and K: Xavier, untouched
    expect_uniform(*m, a + ".k.weight", square);
    expect_uniform(*m, a + ".v.weight", square * factor);
    expect_uniform(*m, a + ".o.weight", square * factor);
    expect_uniform(*m, f + ".fc1.weight", wide * factor);
    expect_uniform(*m, f + ".fc2.weight", wide * factor);
    expect_all(*m, a + ".v.bias", 0);
    expect_all(*m, f + ".fc2.bias", 0);
    EXPECT_EQ(m->graph.find(a + ".in_norm.weight"), eng::kNoTensor);
  }
  expect_uniform(*m, "lm_head.weight", head);
  expect_normal(*m, "embed.tokens.weight", factor / std::sqrt(256.0));
  expect_normal(*m, "embed.positions.weight", factor / std::sqrt(256.0));
  EXPECT_EQ(m->graph.find("final_norm.weight"), eng::kNoTensor);
  EXPECT_EQ(m->config.embed_scale, model::EmbedScale::sqrt_d);  // fairseq's √d on the token embedding, by default
}

// DyT's default: unit-variance embeddings, N(0, d^(−1/2)) × √d; the user's values still win.
TEST(InitRules, DytDefaultsToUnitVarianceEmbeddings) {
  auto m = initialized(big("dyt", 2));
  EXPECT_EQ(m->config.embed_scale, model::EmbedScale::sqrt_d);
  EXPECT_EQ(m->config.init.embed_std, 0.0);
  expect_normal(*m, "embed.tokens.weight", 1 / 16.0);  // × √256 at the input: unit variance
  expect_normal(*m, "layers.1.attn.q.weight", 0.02);   // matrices keep the base init
  auto gpt2 = initialized(big("dyt", 2, {{"embed_scale", "none"}, {"init", {{"embed_std", 0.02}}}}));
  EXPECT_EQ(gpt2->config.embed_scale, model::EmbedScale::none);
  expect_normal(*gpt2, "embed.tokens.weight", 0.02);
}

TEST(InitRules, LipschitzUniformOverSqrtFanIn) {
  auto m = initialized(big("lipschitz", 2, {{"tied_embeddings", false}}));
  EXPECT_EQ(m->config.norm.eps, 1e-6);
  for (const char* p : {"q", "k", "v", "o"}) expect_uniform(*m, fmt::format("layers.1.attn.{}.weight", p), 1 / 16.0);
  expect_uniform(*m, "layers.1.ffn.fc1.weight", 1 / 16.0);  // fan-in d = 256
  expect_uniform(*m, "layers.1.ffn.fc2.weight", 1 / 32.0);  // fan-in d_ff = 1024
  expect_uniform(*m, "lm_head.weight", 1 / 16.0);
  expect_uniform(*m, "embed.tokens.weight", std::sqrt(2.0 / (256 + 256)));
  expect_all(*m, "layers.1.attn.o.bias", 0);
  expect_all(*m, "layers.1.ffn.in_norm.weight", 1);
}

TEST(InitRules, ScaleNormSmallInitAndGainSqrtD) {
  auto m = initialized(big("scalenorm", 2, {{"d_ff", 768}}));
  for (const char* p : {"q", "k", "v", "o"})
    expect_normal(*m, fmt::format("layers.0.attn.{}.weight", p), std::sqrt(2.0 / (5 * 256)));
  expect_normal(*m, "layers.0.ffn.fc1.weight", std::sqrt(2.0 / (768 + 256)));
  expect_normal(*m, "layers.0.ffn.fc2.weight", std::sqrt(2.0 / (768 + 256)));
  for (const char* n : {"layers.0.attn.in_norm.weight", "layers.1.ffn.in_norm.weight", "final_norm.weight"}) {
    EXPECT_EQ(values(*m, n).size(), 1u) << n << ": ScaleNorm has one scalar g";
    expect_all(*m, n, 16.0);
  }
}

// Sub-LN multiplies the base init by γ = √(ln 2L): entry by entry against the plain Pre-LN model
// drawn from the same seed (each parameter has its own stream, so the base draws are identical).
TEST(InitRules, SubLnScalesValueOutputAndFfnByGamma) {
  for (auto [L, want] : std::vector<std::pair<int, double>>{{6, std::sqrt(std::log(12.0))}, {12, 1.783}, {24, 1.968}}) {
    SCOPED_TRACE(fmt::format("L = {}", L));
    auto sub = initialized(tiny("subln", L, {{"activation", "swiglu"}}), 3, eng::DType::f64);
    auto pre = initialized(tiny("pre", L, {{"activation", "swiglu"}}), 3, eng::DType::f64);
    const double gamma = std::sqrt(std::log(2.0 * L));
    EXPECT_NEAR(gamma, want, 1e-3);
    for (int i : {0, L - 1})
      for (const char* p : {"attn.q", "attn.k", "attn.v", "attn.o", "ffn.fc1", "ffn.gate", "ffn.fc2"}) {
        const std::string name = fmt::format("layers.{}.{}.weight", i, p);
        const bool scaled = std::string(p) != "attn.q" && std::string(p) != "attn.k";
        const auto a = values(*sub, name), b = values(*pre, name);
        for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], (scaled ? gamma : 1.0) * b[k], 1e-15) << name;
      }
    expect_all(*sub, "layers.0.attn.inner_norm.weight", 1);
    expect_all(*sub, "layers.0.ffn.mid_norm.weight", 1);
  }
}

// scale_roles(with_biases) scales the bias beside each scaled matrix (torchscale's Sub-LN, DeepNorm).
TEST(InitRules, ScaleRolesScalesTheBiasesBesideTheMatrices) {
  auto m = initialized(tiny("pre", 2), 3, eng::DType::f64);
  for (eng::TensorId id : m->graph.parameters())
    if (m->graph.spec(id).role == Role::bias) fill_constant(*m, m->graph.spec(id).name, 0.5);
  const auto v = values(*m, "layers.1.attn.v.weight");
  scale_roles(*m, {Role::v, Role::fc2}, 2.0, true);
  expect_all(*m, "layers.1.attn.v.bias", 1.0);
  expect_all(*m, "layers.0.ffn.fc2.bias", 1.0);
  expect_all(*m, "layers.1.attn.q.bias", 0.5);
  expect_all(*m, "layers.1.ffn.fc1.bias", 0.5);
  const auto v2 = values(*m, "layers.1.attn.v.weight");
  for (size_t k = 0; k < v.size(); ++k) EXPECT_EQ(v2[k], 2 * v[k]);
}

TEST(InitRules, HybridNormMegatronSigma) {
  const int L = 4;
  auto m = initialized(big("hybridnorm", L, {{"tied_embeddings", false}, {"activation", "swiglu"}}));
  const double sigma = std::sqrt(2.0 / (5 * 256));
  for (const char* p : {"attn.q", "attn.k", "attn.v", "ffn.fc1", "ffn.gate"})
    expect_normal(*m, fmt::format("layers.2.{}.weight", p), sigma);
  expect_normal(*m, "layers.2.attn.o.weight", sigma / std::sqrt(2.0 * L));
  expect_normal(*m, "layers.2.ffn.fc2.weight", sigma / std::sqrt(2.0 * L));
  expect_normal(*m, "embed.tokens.weight", sigma);
  expect_normal(*m, "lm_head.weight", 1 / 16.0);
  for (const char* p : {"attn.q", "attn.k", "attn.v", "ffn.fc1", "ffn.gate"})  // truncated at ±3σ
    expect_truncated_normal(*m, fmt::format("layers.2.{}.weight", p), sigma);
  expect_truncated_normal(*m, "layers.2.attn.o.weight", sigma / std::sqrt(2.0 * L));
  expect_truncated_normal(*m, "embed.tokens.weight", sigma);
  expect_truncated_normal(*m, "lm_head.weight", 1 / 16.0);
  expect_all(*m, "layers.0.attn.q_norm.weight", 1);
  EXPECT_EQ(values(*m, "layers.0.attn.v_norm.weight").size(), 64u);  // per head: D = 256/4
}

TEST(InitRules, SandwichScalesOutputProjections) {
  const int L = 6;
  auto m = initialized(big("sandwich", L));
  expect_normal(*m, "layers.3.attn.q.weight", 0.02);
  expect_normal(*m, "layers.3.ffn.fc1.weight", 0.02);
  expect_normal(*m, "layers.3.attn.o.weight", 0.02 / std::sqrt(2.0 * L));
  expect_normal(*m, "layers.3.ffn.fc2.weight", 0.02 / std::sqrt(2.0 * L));
}

// admin-torch's closed form ω = √((N+1)/ln(N+1) − 1), N = 2L sub-layers; the spec's examples.
TEST(InitRules, AdminClosedFormOmega) {
  for (auto [L, want] : std::vector<std::pair<int, double>>{{6, 2.02}, {12, 2.60}, {24, 3.40}}) {
    auto m = initialized(tiny("admin", L));
    const double n = 2.0 * L, omega = std::sqrt((n + 1) / std::log(n + 1) - 1);
    EXPECT_NEAR(omega, want, 0.005) << "N = " << n;
    for (int i = 0; i < L; ++i)
      for (const char* s : {"attn", "ffn"}) expect_all(*m, fmt::format("layers.{}.{}.admin_omega", i, s), omega, 1e-6);
  }
  auto linear = initialized(tiny("admin", 6, {{"options", {{"admin_omega", "linear"}}}}));
  expect_all(*linear, "layers.3.ffn.admin_omega", 1.0);
  auto constant = initialized(tiny("admin", 6, {{"options", {{"admin_omega", "constant"}}}}));
  expect_all(*constant, "layers.3.ffn.admin_omega", std::sqrt(12.0), 1e-6);
}

// The profiling pass (Transformer-Clinic's adaptive-profiling): ω_1 = 1, then
// ω_{i+1} = √(Var[ω_i ⊙ x_i] + Var[f_i]) over all elements. The recurrence presumes fairseq's scales:
// a stream entering block 1 with variance ~1 (embeddings N(0, d^−1/2) scaled by √d) and Xavier
// branches whose outputs have variance O(0.1–1); then ω grows from 1 like √(1 + Σ_{j<i} Var f_j).
std::vector<double> profiled_omegas(const Json& config, int layers) {
  auto m = initialized(config);
  std::vector<double> omegas;
  for (int i = 0; i < layers; ++i)
    for (const char* s : {"attn", "ffn"}) {
      const auto w = values(*m, fmt::format("layers.{}.{}.admin_omega", i, s));
      for (double v : w) EXPECT_EQ(v, w[0]) << "ω is filled with one profiled scalar";
      omegas.push_back(w[0]);
    }
  std::string list;
  for (double o : omegas) list += fmt::format(" {:.3f}", o);
  std::printf("[ admin profile ] ω by sub-layer:%s\n", list.c_str());
  return omegas;
}

void expect_growing_above_one(const std::vector<double>& omegas) {
  ASSERT_FALSE(omegas.empty());
  EXPECT_EQ(omegas[0], 1.0);
  for (size_t i = 1; i < omegas.size(); ++i) {
    EXPECT_GT(omegas[i], 1.0) << "sub-layer " << i;
    EXPECT_GT(omegas[i], omegas[i - 1]) << "sub-layer " << i;
  }
}

TEST(InitRules, AdminProfiledOmegaGrowsAboveOneWithFairseqConventions) {
  const int L = 6;
  const auto omegas = profiled_omegas(tiny("admin", L,
                                           {{"d_model", 32},
                                            {"d_ff", 64},
                                            {"embed_scale", "sqrt_d"},
                                            {"init", {{"scheme", "xavier"}, {"embed_std", 1 / std::sqrt(32.0)}}},
                                            {"options", {{"admin_omega", "profile"}}}}),
                                      L);
  expect_growing_above_one(omegas);
  // Of the order of admin-torch's closed form for N = 12 (2.02): the two are meant to agree in scale.
  EXPECT_GT(omegas.back(), 1.5);
  EXPECT_LT(omegas.back(), 6.0);
}

// The same with the placement's own defaults (GPT-2 init: embeddings N(0, 0.02), no √d, matrices
// N(0, 0.02)): the stream entering block 1 has variance ~1e-3, so ω_2 = √(Var x_0 + Var f_1) ≈ 0.03
// and every later ω stays far below 1 (0.03 → 0.04), down-weighting the shortcut that Admin means
// to up-weight. FAILS until the admin placement adopts fairseq's scales (see the report).
TEST(InitRules, AdminProfiledOmegaGrowsAboveOneWithDefaults) {
  const int L = 6;
  expect_growing_above_one(
      profiled_omegas(tiny("admin", L, {{"d_model", 32}, {"d_ff", 64}, {"options", {{"admin_omega", "profile"}}}}), L));
}

void expect_row_averages(const Model& m, const std::string& name, int layers) {
  const auto w = values(m, name);
  ASSERT_EQ(w.size(), size_t((layers + 1) * (layers + 1))) << name;
  for (int l = 0; l <= layers; ++l)
    for (int k = 0; k <= layers; ++k)
      EXPECT_FLOAT_EQ(w[size_t(l * (layers + 1) + k)], k <= l ? 1.0f / float(l + 1) : 0.0f)
          << name << " W[" << l << "," << k << "]";
}

TEST(InitRules, DlclWeightsStartAsRowAverages) {
  for (const char* p : {"dlcl_pre", "dlcl_post"}) {
    SCOPED_TRACE(p);
    expect_row_averages(*initialized(tiny(p, 4)), "dlcl.weights", 4);
    // An encoder-decoder: one combination per stack, each sized by its own depth (N = 4, M = 2).
    auto m = initialized(tiny(p, 2, {{"shape", "encoder_decoder"}, {"encoder_layers", 4}}));
    expect_row_averages(*m, "encoder.dlcl.weights", 4);
    expect_row_averages(*m, "decoder.dlcl.weights", 2);
  }
}

// ---------------------------------------------------------------------------------------------
// DeepNorm.

TEST(InitRules, DeepNormConstantsMatchThePaperTable) {
  using A = DeepNormArch;
  auto c = deepnorm_constants(A::decoder_only, 0, 24);
  EXPECT_NEAR(c.alpha, 2.632, 5e-4);
  EXPECT_NEAR(c.beta, 0.269, 5e-4);
  c = deepnorm_constants(A::encoder_of_encoder_decoder, 6, 6);
  EXPECT_NEAR(c.alpha, 1.418, 5e-4);
  EXPECT_NEAR(c.beta, 0.497, 5e-4);
  c = deepnorm_constants(A::decoder_of_encoder_decoder, 6, 6);
  EXPECT_NEAR(c.alpha, 2.060, 5e-4);
  EXPECT_NEAR(c.beta, 0.343, 5e-4);
  // torchscale's encoder of an encoder-decoder: 1.15 instead of the paper's 0.87 (spec §4).
  c = deepnorm_constants(A::encoder_of_encoder_decoder, 6, 6, true);
  EXPECT_NEAR(c.alpha, 1.418, 5e-4);
  EXPECT_NEAR(c.beta, 1.15 / std::pow(6.0 * 6 * 6 * 6 * 6, 1.0 / 16), 1e-12);
  EXPECT_NEAR(c.beta, 0.657, 5e-4);
  for (int n : {1, 3, 6, 12, 18, 100, 1000})
    for (int m : {1, 6, 24, 200}) {
      SCOPED_TRACE(fmt::format("N = {}, M = {}", n, m));
      c = deepnorm_constants(A::encoder_only, n, m);
      EXPECT_NEAR(c.alpha, std::pow(2.0 * n, 0.25), 1e-12);
      EXPECT_NEAR(c.beta, std::pow(8.0 * n, -0.25), 1e-12);
      c = deepnorm_constants(A::decoder_only, n, m);
      EXPECT_NEAR(c.alpha, std::pow(2.0 * m, 0.25), 1e-12);
      EXPECT_NEAR(c.beta, std::pow(8.0 * m, -0.25), 1e-12);
      c = deepnorm_constants(A::encoder_of_encoder_decoder, n, m);
      EXPECT_NEAR(c.alpha, 0.81 * std::pow(std::pow(n, 4.0) * m, 1.0 / 16), 1e-12);
      EXPECT_NEAR(c.beta, 0.87 * std::pow(std::pow(n, 4.0) * m, -1.0 / 16), 1e-12);
      c = deepnorm_constants(A::decoder_of_encoder_decoder, n, m);
      EXPECT_NEAR(c.alpha, std::pow(3.0 * m, 0.25), 1e-12);
      EXPECT_NEAR(c.beta, std::pow(12.0 * m, -0.25), 1e-12);
    }
}

TEST(InitRules, DeepNormModelUsesAlphaOnTheShortcut) {
  const int L = 6;
  auto m = initialized(tiny("deepnorm", L), 2, eng::DType::f64);
  m->set_batch(std::vector<int32_t>(8, 3).data(), std::vector<int32_t>(8, 5).data());
  m->forward(false);
  const double alpha = std::pow(2.0 * L, 0.25);
  const eng::Graph& g = m->graph;
  for (int i = 0; i < L; ++i)
    for (const char* s : {"attn", "ffn"}) {
      const std::string p = fmt::format("layers.{}.{}", i, s);
      const eng::TensorId residual = g.at(p + ".residual");
      int found = 0;
      for (const eng::Node& n : g.nodes()) {
        if (n.out != residual) continue;
        ++found;
        EXPECT_EQ(n.op, eng::OpKind::add) << p;
        EXPECT_EQ(n.attr.f[0], alpha) << p << ": shortcut weight";
        EXPECT_EQ(n.attr.f[1], 1.0) << p << ": branch weight";
        const double* x = g.data<double>(n.in[0]);
        const double* f = g.data<double>(n.in[1]);
        const double* y = g.data<double>(residual);
        for (int64_t k = 0; k < g.shape(residual).numel(); ++k) ASSERT_NEAR(y[k], alpha * x[k] + f[k], 1e-12) << p;
        // The branch is the second input: the shortcut is the block input (post_norm.out of the previous sub-layer).
        if (i > 0 || std::string(s) == "ffn") {
          const std::string prev = std::string(s) == "ffn" ? fmt::format("layers.{}.attn.post_norm.out", i)
                                                           : fmt::format("layers.{}.ffn.post_norm.out", i - 1);
          EXPECT_EQ(n.in[0], g.at(prev)) << p;
        }
      }
      EXPECT_EQ(found, 1) << p;
      EXPECT_NE(g.find(p + ".post_norm.weight"), eng::kNoTensor);
    }
  EXPECT_EQ(g.find("final_norm.weight"), eng::kNoTensor);
}

// The paper's pseudo-code: Xavier-normal with gain β on v, o, fc1, gate, fc2; gain 1 on q, k.
TEST(InitRules, DeepNormPaperInitIsXavierNormalWithGainBeta) {
  const int L = 6;
  auto m = initialized(big("deepnorm", L, {{"activation", "swiglu"}}));
  const double beta = std::pow(8.0 * L, -0.25);
  const double square = std::sqrt(2.0 / 512), wide = std::sqrt(2.0 / 1280);
  for (int i : {0, L - 1}) {
    const std::string a = fmt::format("layers.{}.attn", i), f = fmt::format("layers.{}.ffn", i);
    expect_normal(*m, a + ".q.weight", square);
    expect_normal(*m, a + ".k.weight", square);
    expect_normal(*m, a + ".v.weight", beta * square);
    expect_normal(*m, a + ".o.weight", beta * square);
    expect_normal(*m, f + ".fc1.weight", beta * wide);
    expect_normal(*m, f + ".gate.weight", beta * wide);
    expect_normal(*m, f + ".fc2.weight", beta * wide);
    expect_all(*m, a + ".v.bias", 0);
    expect_all(*m, f + ".fc2.bias", 0);
  }
}

// GLM-130B §2.1 (options.deepnorm_constants = glm130b): α = (2L)^(1/2) on the shortcut and Xavier-normal gain
// β = (2L)^(−1/2) on v, o and the FFN; one stack only, so an encoder-decoder is refused.
TEST(InitRules, DeepNormGlm130bConstantsAreGlmsAlphaAndBeta) {
  const int L = 6;
  const Json glm{{"options", {{"deepnorm_constants", "glm130b"}}}};
  auto m = initialized(big("deepnorm", L, glm));
  const double beta = 1 / std::sqrt(2.0 * L), square = std::sqrt(2.0 / 512), wide = std::sqrt(2.0 / 1280);
  expect_normal(*m, "layers.0.attn.q.weight", square);
  expect_normal(*m, "layers.0.attn.v.weight", beta * square);
  expect_normal(*m, "layers.5.attn.o.weight", beta * square);
  expect_normal(*m, "layers.5.ffn.fc1.weight", beta * wide);
  const auto& nodes = m->graph.nodes();
  const auto residual = std::find_if(nodes.begin(), nodes.end(),
                                     [&](const eng::Node& n) { return n.out == m->graph.at("layers.3.ffn.residual"); });
  ASSERT_NE(residual, nodes.end());
  EXPECT_EQ(residual->attr.f[0], std::sqrt(2.0 * L)) << "the shortcut's α";
  Json encdec = tiny("deepnorm", 2, glm);
  encdec["shape"] = "encoder_decoder";
  try {
    build_model(read_model_config(encdec, "glm"), 1, 4);
    ADD_FAILURE() << "an encoder-decoder with GLM-130B's constants was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one stack"), std::string::npos) << e.what();
  }
}

// torchscale: the existing init times β, entry by entry (biases too; q and k untouched).
TEST(InitRules, DeepNormTorchscaleInitScalesTheBaseInitByBeta) {
  const int L = 6;
  auto deep = initialized(tiny("deepnorm", L, {{"options", {{"deepnorm_init", "torchscale"}}}}), 3, eng::DType::f64);
  auto post = initialized(tiny("post", L), 3, eng::DType::f64);
  const double beta = std::pow(8.0 * L, -0.25);
  for (const char* p : {"attn.q", "attn.k", "attn.v", "attn.o", "ffn.fc1", "ffn.fc2"}) {
    const std::string name = fmt::format("layers.2.{}.weight", p);
    const bool scaled = std::string(p) != "attn.q" && std::string(p) != "attn.k";
    const auto a = values(*deep, name), b = values(*post, name);
    for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], (scaled ? beta : 1.0) * b[k], 1e-15) << name;
  }
}

// An encoder-decoder: each stack uses its own α on the shortcut and β in its init (DeepNet Table 1), the decoder's
// cross-attention included; q and k keep gain 1.
TEST(InitRules, DeepNormEncoderDecoderUsesEachStacksConstants) {
  const int N = 3, M = 2;
  auto m = initialized(big("deepnorm", M, {{"shape", "encoder_decoder"}, {"encoder_layers", N}}));
  const auto enc = deepnorm_constants(DeepNormArch::encoder_of_encoder_decoder, N, M);
  const auto dec = deepnorm_constants(DeepNormArch::decoder_of_encoder_decoder, N, M);
  const double square = std::sqrt(2.0 / 512);
  expect_normal(*m, "encoder.layers.0.attn.q.weight", square);
  expect_normal(*m, "encoder.layers.2.attn.v.weight", enc.beta * square);
  expect_normal(*m, "encoder.layers.1.attn.o.weight", enc.beta * square);
  expect_normal(*m, "decoder.layers.1.attn.v.weight", dec.beta * square);
  expect_normal(*m, "decoder.layers.0.cross.k.weight", square);
  expect_normal(*m, "decoder.layers.0.cross.v.weight", dec.beta * square);
  expect_normal(*m, "decoder.layers.1.cross.o.weight", dec.beta * square);
  const eng::Graph& g = m->graph;
  auto shortcut = [&](const std::string& residual) {
    for (const eng::Node& n : g.nodes())
      if (n.out == g.at(residual)) return n.attr.f[0];
    return 0.0;
  };
  EXPECT_EQ(shortcut("encoder.layers.2.ffn.residual"), enc.alpha);
  EXPECT_EQ(shortcut("decoder.layers.0.cross.residual"), dec.alpha);
  EXPECT_EQ(shortcut("decoder.layers.1.ffn.residual"), dec.alpha);
  EXPECT_NE(enc.alpha, dec.alpha);
}

// T-Fixup in an encoder-decoder: each stack's own factor (encoder 0.67·N^(−1/4), decoder (9M)^(−1/4), cross-attention
// too); the shared token table and the encoder's positions take (9N)^(−1/4), the decoder's positions (9M)^(−1/4).
TEST(InitRules, TFixupEncoderDecoderScalesEachStackByItsOwnFactor) {
  const int N = 4, M = 2;
  auto m = initialized(big("tfixup", M, {{"shape", "encoder_decoder"}, {"encoder_layers", N}}));
  const double enc = 0.67 * std::pow(N, -0.25), dec = std::pow(9.0 * M, -0.25);
  const double square = std::sqrt(6.0 / 512), wide = std::sqrt(6.0 / 1280);
  expect_uniform(*m, "encoder.layers.0.attn.q.weight", square);
  expect_uniform(*m, "encoder.layers.3.attn.v.weight", square * enc);
  expect_uniform(*m, "encoder.layers.1.attn.o.weight", square * enc);
  expect_uniform(*m, "encoder.layers.2.ffn.fc1.weight", wide * enc);
  expect_uniform(*m, "encoder.layers.0.ffn.fc2.weight", wide * enc);
  expect_uniform(*m, "decoder.layers.1.attn.v.weight", square * dec);
  expect_uniform(*m, "decoder.layers.0.cross.k.weight", square);
  expect_uniform(*m, "decoder.layers.0.cross.v.weight", square * dec);
  expect_uniform(*m, "decoder.layers.1.cross.o.weight", square * dec);
  expect_uniform(*m, "decoder.layers.1.ffn.fc2.weight", wide * dec);
  expect_normal(*m, "embed.tokens.weight", std::pow(9.0 * N, -0.25) / std::sqrt(256.0));
  expect_normal(*m, "encoder.embed.positions.weight", std::pow(9.0 * N, -0.25) / std::sqrt(256.0));
  expect_normal(*m, "decoder.embed.positions.weight", dec / std::sqrt(256.0));
  EXPECT_EQ(m->graph.find("decoder.final_norm.weight"), eng::kNoTensor);
}

// Sub-LN in an encoder-decoder (Magneto §2.13): encoder γ = √(ln(3M)·ln(2N)/3), decoder γ = √(ln 3M), weights and
// biases; cross-attention unscaled (torchscale's decoder skips encoder_attn); Sandwich's σ/√(2L) per stack.
TEST(InitRules, SubLnSandwichAndScaledInitUseEachStacksDepthInAnEncoderDecoder) {
  const int N = 6, M = 2;
  const Json shape = {{"shape", "encoder_decoder"}, {"encoder_layers", N}};
  auto plain = initialized(big("pre", M, shape));
  auto sub = initialized(big("subln", M, shape));
  const double enc = std::sqrt(std::log(3.0 * M) * std::log(2.0 * N) / 3), dec = std::sqrt(std::log(3.0 * M));
  const auto ratio = [&](const std::string& name) {
    return moments(values(*sub, name)).std / moments(values(*plain, name)).std;
  };
  EXPECT_NEAR(ratio("encoder.layers.5.attn.v.weight"), enc, 1e-6);
  EXPECT_NEAR(ratio("encoder.layers.0.ffn.fc2.weight"), enc, 1e-6);
  EXPECT_NEAR(ratio("decoder.layers.1.attn.o.weight"), dec, 1e-6);
  EXPECT_NEAR(ratio("decoder.layers.1.ffn.fc1.weight"), dec, 1e-6);
  EXPECT_NEAR(ratio("decoder.layers.0.cross.v.weight"), 1.0, 1e-6);
  EXPECT_NEAR(ratio("decoder.layers.1.cross.o.weight"), 1.0, 1e-6);
  EXPECT_NEAR(ratio("decoder.layers.0.cross.q.weight"), 1.0, 1e-6);
  EXPECT_NE(sub->graph.find("decoder.layers.0.attn.inner_norm.weight"), eng::kNoTensor);
  EXPECT_EQ(sub->graph.find("decoder.layers.0.cross.inner_norm.weight"), eng::kNoTensor);  // torchscale: self only

  auto sandwich = initialized(big("sandwich", M, shape));
  const double std = sandwich->config.init.std;
  expect_normal(*sandwich, "encoder.layers.3.attn.o.weight", std / std::sqrt(2.0 * N));
  expect_normal(*sandwich, "encoder.layers.0.ffn.fc2.weight", std / std::sqrt(2.0 * N));
  expect_normal(*sandwich, "decoder.layers.1.cross.o.weight", std / std::sqrt(2.0 * M));
  expect_normal(*sandwich, "decoder.layers.0.ffn.fc2.weight", std / std::sqrt(2.0 * M));

  // The base init's GPT-2 scaled scheme counts each stack's own layers too.
  auto scaled = initialized(
      big("pre", M, {{"shape", "encoder_decoder"}, {"encoder_layers", N}, {"init", {{"scheme", "scaled"}}}}));
  expect_normal(*scaled, "encoder.layers.2.attn.o.weight", 0.02 / std::sqrt(2.0 * N));
  expect_normal(*scaled, "decoder.layers.1.cross.o.weight", 0.02 / std::sqrt(2.0 * M));
  expect_normal(*scaled, "decoder.layers.0.attn.q.weight", 0.02);
}

// Admin in an encoder-decoder: ω from the closed form with N counting the sub-layers of ω's own stack.
TEST(InitRules, AdminEncoderDecoderCountsEachStacksSubLayers) {
  auto m = initialized(tiny("admin", 2, {{"shape", "encoder_decoder"}, {"encoder_layers", 4}}));
  auto omega = [](double n) { return std::sqrt((n + 1) / std::log(n + 1) - 1); };
  expect_all(*m, "encoder.layers.3.ffn.admin_omega", omega(8), 1e-6);
  expect_all(*m, "decoder.layers.0.cross.admin_omega", omega(6), 1e-6);
  expect_all(*m, "decoder.layers.1.attn.admin_omega", omega(6), 1e-6);
}

// ---------------------------------------------------------------------------------------------
// The starting values of the other placements' scalars and gains.

TEST(InitRules, ScalarsAndGainsStartWhereTheirPapersSay) {
  auto mix = initialized(big("mixln", 2));
  expect_normal(*mix, "embed.tokens.weight", std::sqrt(2.0 / 5));

  auto qk = initialized(tiny("qknorm", 2, {{"max_seq_len", 16}}));
  expect_all(*qk, "layers.1.attn.qk_scale", std::log2(16.0 * 16 - 16), 1e-5);
  auto qk_set = initialized(tiny("qknorm", 2, {{"options", {{"qk_scale_init", 2.5}}}}));
  expect_all(*qk_set, "layers.1.attn.qk_scale", 2.5);

  auto dyt = initialized(tiny("dyt", 2));
  for (const char* n : {"layers.0.attn.in_norm.alpha", "layers.1.ffn.in_norm.alpha", "final_norm.alpha"})
    expect_all(*dyt, n, 0.5);
  expect_all(*dyt, "layers.0.attn.in_norm.weight", 1);
  expect_all(*dyt, "layers.0.attn.in_norm.bias", 0);
  auto llama = initialized(
      tiny("dyt", 2, {{"options", {{"dyt_alpha_attn", 0.8}, {"dyt_alpha_ffn", 0.2}, {"dyt_alpha_final", 0.1}}}}));
  expect_all(*llama, "layers.1.attn.in_norm.alpha", 0.8f);
  expect_all(*llama, "layers.1.ffn.in_norm.alpha", 0.2f);
  expect_all(*llama, "final_norm.alpha", 0.1f);

  auto gemma = initialized(tiny("gemma2", 2));
  for (const char* n : {"layers.0.attn.in_norm.weight", "layers.0.attn.out_norm.weight", "final_norm.weight"})
    expect_all(*gemma, n, 0);
  EXPECT_EQ(gemma->graph.find("layers.0.attn.q.bias"), eng::kNoTensor);

  auto nf = initialized(tiny("normformer", 2));
  expect_all(*nf, "layers.1.attn.head_scale", 1);
  EXPECT_EQ(values(*nf, "layers.1.attn.head_scale").size(), 2u);
  expect_all(*nf, "layers.1.ffn.resid_scale", 1);
  expect_all(*nf, "layers.1.ffn.mid_norm.weight", 1);
  EXPECT_EQ(values(*nf, "layers.1.ffn.mid_norm.weight").size(), 24u);

  auto rz = initialized(tiny("rezero", 3));
  for (int i = 0; i < 3; ++i) expect_all(*rz, fmt::format("layers.{}.rezero_alpha", i), 0);
  auto gp = initialized(tiny("gpas", 3));
  for (int i = 0; i < 3; ++i) expect_all(*gp, fmt::format("layers.{}.gpas_gate", i), 0);

  auto lns = initialized(big("lns", 2));  // plain N(0, 0.02), no depth scaling
  expect_normal(*lns, "layers.1.ffn.fc2.weight", 0.02);
  auto olmo = initialized(big("olmo2", 2));
  expect_truncated_normal(*olmo, "layers.1.attn.o.weight", 0.02);
}

// The untied head: as the scheme (auto), Xavier in either form, or N(0, head_std) (0 = d^(−1/2)). The
// head is [V, d] = [512, 256] here, so Xavier's std √(2/(V + d)) differs from d^(−1/2).
TEST(InitRules, HeadInitOptions) {
  const Json untied{{"tied_embeddings", false}, {"vocab_size", 512}};
  const double xavier_std = std::sqrt(2.0 / (512 + 256));
  auto with = [&](const Json& init) {
    Json extra = untied;
    extra["init"] = init;
    return initialized(big("pre", 1, extra));
  };
  expect_normal(*with(Json::object()), "lm_head.weight", 0.02);  // auto under gpt2: N(0, init.std)
  expect_uniform(*with({{"scheme", "xavier"}}), "lm_head.weight", std::sqrt(3.0) * xavier_std);
  expect_normal(*with({{"scheme", "xavier"}, {"xavier", "normal"}}), "lm_head.weight", xavier_std);
  expect_uniform(*with({{"head", "xavier_uniform"}}), "lm_head.weight", std::sqrt(3.0) * xavier_std);
  expect_normal(*with({{"head", "xavier_normal"}}), "lm_head.weight", xavier_std);
  expect_normal(*with({{"head", "normal"}}), "lm_head.weight", 1 / 16.0);
  auto fixed = with({{"head", "normal"}, {"head_std", 0.05}});
  expect_normal(*fixed, "lm_head.weight", 0.05);
  expect_normal(*fixed, "layers.0.attn.q.weight", 0.02);  // only the head
  // Xavier's normal form for every matrix of the scheme: std √(2/(fan_in + fan_out)).
  auto normal = with({{"scheme", "xavier"}, {"xavier", "normal"}});
  expect_normal(*normal, "layers.0.attn.q.weight", std::sqrt(2.0 / 512));
  expect_normal(*normal, "layers.0.ffn.fc1.weight", std::sqrt(2.0 / 1280));
}

TEST(InitRules, HeadInitOptionsAreValidated) {
  auto error = [](const Json& model) -> std::string {
    try {
      read_model_config(big("pre", 1, model), "model");
    } catch (const Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  auto has = [](const std::string& text, std::initializer_list<const char*> parts) {
    for (const char* p : parts)
      if (text.find(p) == std::string::npos) return testing::AssertionFailure() << "'" << p << "' not in: " << text;
    return testing::AssertionSuccess();
  };
  EXPECT_TRUE(has(error({{"init", {{"head", "normal"}}}}), {"init.head = 'normal' needs tied_embeddings = false"}));
  EXPECT_TRUE(has(error({{"tied_embeddings", false}, {"init", {{"head_std", 0.1}}}}),
                  {"init.head_std = 0.1 is used only with init.head = 'normal'"}));
  EXPECT_TRUE(
      has(error({{"tied_embeddings", false}, {"init", {{"head", "kaiming"}}}}), {"model.init.head", "kaiming"}));
  EXPECT_TRUE(has(error({{"init", {{"xavier", "truncated"}}}}), {"model.init.xavier", "truncated"}));
  EXPECT_TRUE(has(error({{"tied_embeddings", false}, {"init", {{"head", "normal"}, {"head_std", -1}}}}),
                  {"model.init.head_std"}));
  EXPECT_EQ(error({{"tied_embeddings", false}, {"init", {{"head", "normal"}, {"head_std", 0.1}}}}), "(accepted)");
}

// The independent reference: tools/torch_reference.py draws the training init of T-Fixup, OLMo 2,
// HybridNorm and DyT with torch.nn.init (xavier_uniform_, trunc_normal_, normal_) from the papers' rules
// and records each matrix's moments (tests/fixtures/init_rules.json, d = 256, L = 2, untied head; case
// tfixup_encdec: T-Fixup's two-stack rule in an encoder-decoder with N = 16, M = 2).
// normlab's init of the same config must realize the same distribution: std within 3% (two samples of
// ≥ 16k entries), the same kurtosis (2.83 truncated, 1.8 uniform, 3 normal), and for the bounded ones
// (truncated, uniform) the same largest |w|.
TEST(InitRules, MatchTheTorchReferenceInitRules) {
  const auto path = std::filesystem::path(NORMLAB_SOURCE_DIR) / "tests/fixtures/init_rules.json";
  const Json fixture = Json::parse(std::ifstream(path));
  ASSERT_FALSE(fixture["placements"].empty());
  for (const auto& [name_of_case, entry] : fixture["placements"].items()) {
    auto m = initialized(entry["config"]);
    ASSERT_EQ(m->config.placement, entry["config"]["placement"].get<std::string>()) << name_of_case;
    for (const auto& [name, want] : entry["params"].items()) {
      ASSERT_NE(m->graph.find(name), eng::kNoTensor) << name_of_case << ": " << name;
      const Moments got = moments(values(*m, name));
      const double std = want["std"].get<double>(), kurtosis = want["kurtosis"].get<double>();
      EXPECT_NEAR(got.std / std, 1.0, 0.03)
          << name_of_case << " " << name << ": std " << got.std << " vs torch " << std;
      EXPECT_NEAR(got.kurtosis, kurtosis, 0.2) << name_of_case << " " << name;
      if (kurtosis < 2.9) {  // bounded: truncated normal or uniform
        EXPECT_NEAR(got.max_abs / want["max_abs"].get<double>(), 1.0, 0.03) << name_of_case << " " << name;
      }
    }
  }
}

}  // namespace
}  // namespace normlab::model
