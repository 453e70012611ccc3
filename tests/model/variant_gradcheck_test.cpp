// Whole-model finite differences in double precision: for every placement of the registry, and for
// the switches that change the graph (QK/V norms, soft-caps, PB-relax, NormFormer's head scale, LNS
// forms, per-sub-layer gates, embedding norm and scale, DyT, gated FFNs, RoPE, the encoder ...), the analytic
// gradient of every parameter matches central differences to a relative error ≤ 1e-6.
//
// Parameters are initialized by the placement's own rule, then perturbed, so that scalars that
// start at 0 (ReZero α) or gains that start at 1 are generic. GPAS is the exception by design: its
// stop-gradient makes the analytic gradient of everything below a nonzero gate differ from the
// derivative of the forward function. At a = 0 the gate is the identity in both directions, so the
// whole-model check runs with every gate at 0; the gate's own gradient with a ≠ 0 is checked
// separately (one gate nonzero at a time, and the shared-gate sum against its closed form).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "model/gradient_check.h"
#include "model/init.h"
#include "model/placement.h"
#include "model/transformer.h"

namespace normlab::model {
namespace {

namespace eng = normlab::engine;

Json tiny(const std::string& placement, const Json& extra = Json::object()) {
  Json j = gradient_check_section();
  j["placement"] = placement;
  j.merge_patch(extra);
  return j;
}

void fill_gates(Model& m, const std::function<double(const std::string&)>& value) {
  for (eng::TensorId id : m.graph.parameters()) {
    const std::string& name = m.graph.spec(id).name;
    if (name.ends_with("gpas_gate")) *m.graph.data<double>(id) = value(name);
  }
}

std::unique_ptr<Model> tiny_model(const Json& config) {
  auto m = gradient_check_model(read_model_config(config, "gradcheck"));
  if (m->config.placement == "gpas") fill_gates(*m, [](const std::string&) { return 0.0; });
  return m;
}

// Every parameter's relative error ‖analytic − numeric‖/‖numeric‖ (entries sampled on a stride for the large ones),
// checked ≤ tol within GradientComparison::agrees's round-off floor (GPAS's last gate, read only by the
// scale-invariant final norm, has a gradient that small). The attention key bias (and a k-norm's bias) shifts every
// score of a query row equally, which softmax ignores: its exact gradient is 0 wherever nothing between the bias and
// the scores depends on the position (no RoPE), so they alone may be zero in both; any other zero gradient is a
// failure, since a check of a zero gradient could not fail.
void check_gradients(Model& m, const std::function<bool(const std::string&)>& select = {}, double tol = 1e-6) {
  const std::vector<GradientComparison> checked = compare_gradients(m, select);
  for (const GradientComparison& c : checked) {
    if (c.numeric_norm < 1e-9) {
      EXPECT_TRUE(c.name.ends_with(".k.bias") || c.name.ends_with(".k_norm.bias"))
          << c.name << ": its gradient is zero, so this check could not fail";
      EXPECT_LE(c.analytic_norm, 1e-9) << c.name << ": the numeric gradient is zero but the analytic one is not";
      continue;
    }
    EXPECT_TRUE(c.agrees(tol)) << "gradient of " << c.name << ": relative error " << c.relative() << ", |numeric| "
                               << c.numeric_norm;
  }
  EXPECT_FALSE(checked.empty()) << "no parameter was selected";
}

// ---------------------------------------------------------------------------------------------
// Every placement with its defaults.

class VariantGradcheck : public ::testing::TestWithParam<std::string> {};

TEST_P(VariantGradcheck, WholeModelMatchesFiniteDifferences) {
  auto m = tiny_model(tiny(GetParam()));
  check_gradients(*m);
}

INSTANTIATE_TEST_SUITE_P(VariantGradcheck, VariantGradcheck, ::testing::ValuesIn(placement_names()),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------------------------------------
// Switch combinations.

struct Combo {
  std::string name;
  std::string placement;
  Json extra;
};

void PrintTo(const Combo& c, std::ostream* os) { *os << c.name << " (" << c.placement << " " << c.extra.dump() << ")"; }

std::vector<Combo> combos() {
  std::vector<Combo> all = {
      {"qk_full_v_norm", "pre", {{"options", {{"qk_norm", "full"}, {"v_norm", true}}}}},
      {"qk_per_head_v_norm", "pre", {{"options", {{"qk_norm", "per_head"}, {"v_norm", true}}}}},
      {"qk_l2", "pre", {{"options", {{"qk_norm", "l2"}, {"qk_scale_init", 2.5}}}}},
      {"qk_per_head_rope", "pre", {{"positions", "rope"}, {"options", {{"qk_norm", "per_head"}}}}},
      // Small caps so that tanh is far from linear on these logits.
      {"softcaps", "pre", {{"options", {{"attn_softcap", 1.5}, {"final_softcap", 2.0}}}}},
      {"gemma2_rope", "gemma2", {{"positions", "rope"}}},
      // PB-relax divides by a detached max|x|: exact only through a scale-invariant norm, and LayerNorm
      // is scale-invariant up to its ε, so ε is made negligible here (with ε = 1e-5 the omitted term is
      // ~ε/Var ≈ 1e-6 relative, at the tolerance).
      {"sandwich_pb_relax", "sandwich", {{"norm", {{"eps", 1e-12}}}, {"options", {{"pb_relax", true}}}}},
      {"normformer_fairseq", "normformer", {{"options", {{"head_scale", "fairseq"}}}}},
      {"normformer_plain",
       "normformer",
       {{"options", {{"scale_attn", false}, {"scale_heads", false}, {"scale_fc", false}, {"scale_resids", false}}}}},
      {"lns_gain_init", "lns", {{"options", {{"lns_form", "gain_init"}}}}},
      {"gpas_per_sublayer", "gpas", {{"options", {{"gpas_per_sublayer", true}}}}},
      {"rezero_per_sublayer", "rezero", {{"options", {{"rezero_per_sublayer", true}}}}},
      {"embed_norm_learned_scale", "pre", {{"embed_norm", true}, {"embed_scale", "learned"}}},
      {"embed_scale_sqrt_d", "peri", {{"embed_norm", true}, {"embed_scale", "sqrt_d"}}},
      {"dyt_bias", "dyt", {{"norm", {{"bias", true}}}}},
      {"dyt_llama",
       "dyt",
       {{"norm", {{"bias", false}}},
        {"embed_scale", "learned"},
        {"options", {{"dyt_alpha_attn", 0.8}, {"dyt_alpha_ffn", 0.2}, {"dyt_alpha_final", 0.2}}}}},
      {"geglu_rope", "pre", {{"activation", "geglu"}, {"positions", "rope"}}},
      {"swiglu_rope_nobias", "pre", {{"activation", "swiglu"}, {"positions", "rope"}, {"bias", false}}},
      {"olmo2_rope", "olmo2", {{"positions", "rope"}}},
      {"mixln_half", "mixln", {{"options", {{"mixln_ratio", 0.5}}}}},
      {"admin_profile", "admin", {{"options", {{"admin_omega", "profile"}}}}},
      {"deepnorm_torchscale", "deepnorm", {{"options", {{"deepnorm_init", "torchscale"}}}}},
      {"residual_alpha", "residual", {{"options", {{"residual_alpha", 0.5}}}}},
      {"pre_crms_rope_swiglu", "pre_crms", {{"positions", "rope"}, {"activation", "swiglu"}}},
      {"post_final_norm_untied", "post", {{"final_norm", true}, {"tied_embeddings", false}}},
      {"scalenorm_untied", "scalenorm", {{"tied_embeddings", false}}},
      {"hybridnorm_untied", "hybridnorm", {{"tied_embeddings", false}, {"activation", "swiglu"}}},
      {"subln_geglu", "subln", {{"activation", "geglu"}}},
      {"pre_rms_rope", "pre_rms", {{"positions", "rope"}}},
      {"dlcl_post_rms", "dlcl_post", {{"norm", {{"type", "rmsnorm"}}}}},
      {"qknorm_gelu_untied", "qknorm", {{"tied_embeddings", false}}},
      // Encoders (bidirectional attention, a masked-LM loss over some positions) under the placements of
      // Xiong's and the MT papers' comparisons.
      {"encoder_post", "post", {{"shape", "encoder"}}},
      {"encoder_pre_rope", "pre", {{"shape", "encoder"}, {"positions", "rope"}}},
      {"encoder_deepnorm", "deepnorm", {{"shape", "encoder"}}},
      {"encoder_admin", "admin", {{"shape", "encoder"}}},
      // Encoder-decoders (a padded source, cross-attention) under the placements of the MT papers, with unequal
      // stacks so that each stack's own depth constants are exercised, and label smoothing on the loss.
      {"encdec_post", "post", {{"shape", "encoder_decoder"}, {"encoder_layers", 3}, {"label_smoothing", 0.1}}},
      {"encdec_pre", "pre", {{"shape", "encoder_decoder"}, {"encoder_layers", 3}}},
      {"encdec_pre_rms", "pre_rms", {{"shape", "encoder_decoder"}}},
      {"encdec_deepnorm", "deepnorm", {{"shape", "encoder_decoder"}, {"encoder_layers", 3}}},
      {"encdec_admin", "admin", {{"shape", "encoder_decoder"}, {"encoder_layers", 3}}},
      {"encdec_tfixup", "tfixup", {{"shape", "encoder_decoder"}, {"encoder_layers", 3}, {"label_smoothing", 0.1}}},
      {"encdec_mixln",
       "mixln",
       {{"shape", "encoder_decoder"}, {"encoder_layers", 3}, {"options", {{"mixln_ratio", 0.67}}}}},
      {"encdec_admin_profile",
       "admin",
       {{"shape", "encoder_decoder"}, {"options", {{"admin_omega", "profile"}}}, {"label_smoothing", 0.1}}},
  };
  // Every other placement as an encoder-decoder (QK-norm and soft-caps reach cross-attention; Sub-LN's has no inner
  // norm; DLCL and ResiDual keep one combination / one pair of streams per stack; HybridNorm's QKV norms and
  // NormFormer's extras (with scale_cross) reach cross-attention; Pre-CRMSNorm's reads a compressed memory).
  for (const char* p :
       {"dyt", "gemma2", "gpas", "lipschitz", "olmo2", "peri", "qknorm", "rezero", "scalenorm", "lns", "subln",
        "sandwich", "dlcl_pre", "dlcl_post", "residual", "normformer", "hybridnorm", "hybridnorm_star", "pre_crms"})
    all.push_back({fmt::format("encdec_{}", p), p, {{"shape", "encoder_decoder"}, {"encoder_layers", 3}}});
  all.push_back({"encdec_normformer_scale_cross_fairseq",
                 "normformer",
                 {{"shape", "encoder_decoder"},
                  {"encoder_layers", 3},
                  {"options", {{"scale_cross", true}, {"head_scale", "fairseq"}}}}});
  return all;
}

class VariantGradcheckSwitches : public ::testing::TestWithParam<Combo> {};

TEST_P(VariantGradcheckSwitches, WholeModelMatchesFiniteDifferences) {
  const Combo& c = GetParam();
  auto m = tiny_model(tiny(c.placement, c.extra));
  check_gradients(*m);
}

INSTANTIATE_TEST_SUITE_P(VariantGradcheckSwitches, VariantGradcheckSwitches, ::testing::ValuesIn(combos()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// GPAS gates with a ≠ 0.

double silu_prime(double a) {
  const double s = 1 / (1 + std::exp(-a));
  return s * (1 + a * (1 - s));
}

std::vector<std::string> gate_names(const Model& m) {
  std::vector<std::string> names;
  for (eng::TensorId id : m.graph.parameters())
    if (m.graph.spec(id).name.ends_with("gpas_gate")) names.push_back(m.graph.spec(id).name);
  return names;
}

// One gate per sub-layer, one of them nonzero at a time: everything above that gate sees gates at 0
// (identity both ways), so its own analytic gradient is the true derivative of the loss.
TEST(VariantGradcheckGpas, EachGateWithNonzeroValueMatchesFiniteDifferences) {
  auto m = tiny_model(tiny("gpas", {{"options", {{"gpas_per_sublayer", true}}}}));
  const auto names = gate_names(*m);
  ASSERT_EQ(names.size(), 4u);
  for (const std::string& gate : names) {
    for (double a : {0.7, -0.9}) {
      SCOPED_TRACE(fmt::format("{} = {}", gate, a));
      fill_gates(*m, [&](const std::string& n) { return n == gate ? a : 0.0; });
      check_gradients(*m, [&](const std::string& n) { return n == gate; });
    }
  }
}

// With one gate per sub-layer, the top gate scales only what the final norm reads, and RMSNorm is
// scale-invariant up to its ε: that gate barely changes the function, so its gradient is ~ε-sized,
// orders of magnitude below the other gates' (the per-layer form does not have this dead gate: its
// attention use moves the FFN's input). This pins the property the check above can only verify
// within round-off.
TEST(VariantGradcheckGpas, TopGatePerSublayerOnlyFeedsTheScaleInvariantFinalNorm) {
  auto m = tiny_model(tiny("gpas", {{"options", {{"gpas_per_sublayer", true}}}}));
  fill_gates(*m, [](const std::string&) { return 0.3; });
  eng::Graph& g = m->graph;
  g.zero_param_grads();
  g.forward(true);
  g.backward(m->loss);
  const double top = std::abs(*g.grad<double>(g.at("layers.1.ffn.gpas_gate")));
  for (const char* other : {"layers.0.attn.gpas_gate", "layers.0.ffn.gpas_gate", "layers.1.attn.gpas_gate"})
    EXPECT_LT(top, 1e-3 * std::abs(*g.grad<double>(g.at(other)))) << other;
}

// The stop-gradient is really there: with a gate below the top nonzero, the analytic gradient of the
// parameters under it is NOT the derivative of the forward function (it skips the (1 − SiLU(a))
// factor), which is the method. This guards against a gpas op that silently differentiates through.
TEST(VariantGradcheckGpas, NonzeroGateMakesGradientsBelowItDifferFromFiniteDifferences) {
  auto m = tiny_model(tiny("gpas", {{"options", {{"gpas_per_sublayer", true}}}}));
  fill_gates(*m, [](const std::string& n) { return n == "layers.1.attn.gpas_gate" ? 1.0 : 0.0; });
  OneThread one_thread;
  eng::Graph& g = m->graph;
  g.zero_param_grads();
  g.forward(true);
  g.backward(m->loss);
  const eng::TensorId id = g.at("layers.0.ffn.fc2.weight");
  double* w = g.data<double>(id);
  double diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < g.shape(id).numel(); ++i) {
    const double saved = w[i], h = 1e-5;
    w[i] = saved + h;
    const double up = testing::loss_of(g, m->loss);
    w[i] = saved - h;
    const double down = testing::loss_of(g, m->loss);
    w[i] = saved;
    const double numeric = (up - down) / (2 * h), analytic = g.grad<double>(id)[i];
    // Layer 1's attention gate scales the stream by k = 1 − SiLU(1) ≈ 0.27 in the forward pass only,
    // so the true gradient of what lies below it differs from the analytic one by about that factor.
    diff2 += (analytic - numeric) * (analytic - numeric);
    ref2 += numeric * numeric;
  }
  EXPECT_GT(std::sqrt(diff2 / ref2), 0.1) << "the analytic gradient below a nonzero GPAS gate equals the true "
                                             "derivative: the stop-gradient is missing";
}

// The default form shares one gate per layer between both sub-layers: its gradient is the sum over
// both uses of −SiLU'(a)·⟨∂L/∂y, x⟩ (with the unscaled upstream gradient), read off the graph.
TEST(VariantGradcheckGpas, SharedGateGradientIsTheSumOverItsTwoUses) {
  auto m = tiny_model(tiny("gpas"));
  fill_gates(*m, [](const std::string& n) { return n.starts_with("layers.0") ? 0.6 : -0.4; });
  eng::Graph& g = m->graph;
  g.zero_param_grads();
  g.forward(true);
  g.backward(m->loss);
  for (int i = 0; i < 2; ++i) {
    const eng::TensorId gate = g.at(fmt::format("layers.{}.gpas_gate", i));
    const double a = *g.data<double>(gate);
    double dot = 0;
    for (const char* s : {"attn", "ffn"}) {
      const eng::TensorId x = g.at(fmt::format("layers.{}.{}.residual", i, s));
      const eng::TensorId y = g.at(fmt::format("layers.{}.{}.gated", i, s));
      for (int64_t k = 0; k < g.shape(x).numel(); ++k) dot += g.grad<double>(y)[k] * g.data<double>(x)[k];
    }
    const double want = -silu_prime(a) * dot;
    EXPECT_NEAR(*g.grad<double>(gate), want, 1e-12 * std::max(1.0, std::abs(want))) << "layer " << i;
    EXPECT_GT(std::abs(want), 1e-6);
  }
}

}  // namespace
}  // namespace normlab::model
