// HybridNorm: Zhuo et al., "HybridNorm: Towards Stable and Efficient Transformer Training via Hybrid
// Normalization" (arXiv 2503.04598). §2.20
//
//   attn:  h ← h + W_O · Attn(RMS_q q, RMS_k k, RMS_v v)     (per head; no input norm)
//   ffn:   u = RMS(h);  h ← u + F(u)                         (Post-Norm at the FFN input)
//
// HybridNorm*: block 0 is Pre-Norm for both sub-layers (QKV norms kept).
//
// The paper's models are decoder-only. In an encoder-decoder, cross-attention takes the attention form (q from the
// decoder's stream, k and v from the encoder's output, each normed per head; no input norm), and the init's L is
// the depth of each parameter's own stack.
#include <cmath>

#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
using engine::Role;
constexpr Switch kSwitches[] = {{"star", "false", "HybridNorm*: block 0 uses Pre-Norm for both sub-layers"}};

TensorId hybridnorm(const SubLayer& s, TensorId h) {
  if (s.flag("star") && s.index() == 0) return pre_ln(s, h);
  if (s.kind() != Branch::ffn) return s.add(h, s.branch(h));
  TensorId u = s.norm("in_norm", h);
  return s.add(u, s.branch(u));
}

void megatron_small_init(InitContext& ctx) {
  Model& m = ctx.model;
  const double sigma = std::sqrt(2.0 / (5.0 * m.config.d_model));
  redraw_truncated_normal(m, {Role::q, Role::k, Role::v, Role::fc1, Role::gate, Role::embedding}, sigma, ctx.seed);
  for (const StackSpec& stack : stacks(m.config))
    redraw_truncated_normal(m, {Role::o, Role::fc2}, sigma / std::sqrt(2.0 * stack.layers), ctx.seed, stack.prefix());
  redraw_truncated_normal(m, {Role::head}, 1.0 / std::sqrt(m.config.d_model), ctx.seed);
}

constexpr std::string_view kDefaults = R"({"norm": {"type": "rmsnorm", "eps": 1e-5},
                                           "options": {"qk_norm": "per_head", "v_norm": true}})";
constexpr std::string_view kStarDefaults = R"({"norm": {"type": "rmsnorm", "eps": 1e-5},
                                               "options": {"qk_norm": "per_head", "v_norm": true, "star": true}})";
}  // namespace

extern const Placement kHybridNorm{
    .name = "hybridnorm",
    .display_name = "HybridNorm",
    .paper = "Zhuo et al. 2025, HybridNorm (arXiv 2503.04598)",
    .equations = "h = x + Attn(QKV-norm per head);  u = RMS(h); x' = u + FFN(u)",
    .defaults = kDefaults,
    .switches = kSwitches,
    .sublayer = hybridnorm,
    .init = megatron_small_init,
    .init_rule =
        "truncated normal (±3σ) with σ = √(2/(5d)); o, fc2: σ/√(2L) (encoder-decoder: L of their stack); untied head "
        "σ = 1/√d (realized stds 0.9866σ)",
    .init_source = "HybridNorm code: init_fn full_megatron, truncated normal at ±3σ (spec §2.20)",
};

extern const Placement kHybridNormStar{
    .name = "hybridnorm_star",
    .display_name = "HybridNorm*",
    .paper = "Zhuo et al. 2025, HybridNorm* (arXiv 2503.04598)",
    .equations = "HybridNorm, with block 0 Pre-Norm for both sub-layers (QKV norms kept)",
    .defaults = kStarDefaults,
    .switches = kSwitches,
    .sublayer = hybridnorm,
    .init = megatron_small_init,
    .init_rule = "as hybridnorm: truncated normal (±3σ), σ = √(2/(5d)); o, fc2: σ/√(2L); untied head 1/√d",
    .init_source = "HybridNorm code: init_fn full_megatron, truncated normal at ±3σ (spec §2.20)",
};

}  // namespace normlab::model
