// ReZero: Bachlechner et al., "ReZero is All You Need: Fast Convergence at Large Depth", UAI 2021
// (arXiv 2003.04887). §2.4
//
//   h ← h + α_ℓ · F(h),   α_ℓ = 0 at init
//
// No norms at all, and no final norm. At init every block is the identity map. The official code has
// one α per layer, shared by its sub-layers; a per-sub-layer α is the common variant (switch).
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
constexpr Switch kSwitches[] = {
    {"rezero_per_sublayer", "false", "one α per sub-layer instead of one per layer (official code)"}};

TensorId rezero(const SubLayer& s, TensorId h) {
  TensorId alpha = s.scalar("rezero_alpha", 0.0, !s.flag("rezero_per_sublayer"));
  return s.scale_add(h, s.branch(h), alpha, "residual");
}
}  // namespace

extern const Placement kReZero{
    .name = "rezero",
    .display_name = "ReZero",
    .paper = "Bachlechner et al. 2021, ReZero is All You Need (arXiv 2003.04887)",
    .equations = "h = x + α·Attn(x);  x' = h + α·FFN(h);  α = 0 at init, one per layer",
    .final_norm = false,
    .defaults = R"({"norm": {"type": "none"}})",
    .switches = kSwitches,
    .sublayer = rezero,
    .init_rule = "α = 0",
    .notes = "one α per layer shared by its sub-layers, as in the official code (paper: per residual block)",
};

}  // namespace normlab::model
