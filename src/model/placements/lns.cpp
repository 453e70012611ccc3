// LayerNorm Scaling: Sun et al., "The Curse of Depth in Large Language Models", NeurIPS 2025
// (arXiv 2502.05795). §2.21
//
//   h ← h + F(Norm(h) · 1/√ℓ),   ℓ = 1..L;  the final norm is not scaled
//
// Pre-LN whose branch inputs shrink with depth, so the stream's variance grows polynomially rather
// than exponentially and deep layers keep contributing. The GPAS repo's form instead starts the
// norm's gain at 1/√ℓ (the same value at init, different Adam dynamics).
#include <cmath>

#include "model/placements/variants.h"

namespace normlab::model {

namespace {
constexpr Switch kSwitches[] = {
    {"lns_form", "\"constant\"",
     "constant: a fixed 1/√ℓ after a γ = 1 norm (official) | gain_init: γ starts at 1/√ℓ (GPAS repo)",
     "constant|gain_init"}};

TensorId lns(const SubLayer& s, TensorId h) {
  const double factor = 1.0 / std::sqrt(static_cast<double>(s.layer()));
  if (s.text("lns_form") == "gain_init") return s.add(h, s.branch(s.norm("in_norm", h, {.gain_init = factor})));
  return s.add(h, s.branch(s.scale(s.norm("in_norm", h), factor, "lns_scaled")));
}
}  // namespace

extern const Placement kLayerNormScaling{
    .name = "lns",
    .display_name = "LayerNorm Scaling",
    .paper = "Sun et al. 2025, The Curse of Depth in Large Language Models (arXiv 2502.05795)",
    .equations = "h = x + Attn(Norm(x)/√ℓ);  x' = h + FFN(Norm(h)/√ℓ);  final norm unscaled",
    .defaults = R"({"norm": {"type": "rmsnorm", "eps": 1e-6}})",
    .switches = kSwitches,
    .sublayer = lns,
    .init_rule = "plain N(0, std); do not combine with the depth-scaled init (init.scheme = scaled)",
};

}  // namespace normlab::model
