// GPAS: Chen et al., "GPAS: Accelerating Convergence of LLM Pretraining via Gradient-Preserving
// Activation Scaling", NeurIPS 2025 (arXiv 2506.22049). §2.23, §1.6
//
//   h ← G_ℓ(h + F(Norm(h))),   G(z) = z − SiLU(a)·sg(z),  a = 0 at init
//
// The gate shrinks the stream in the forward pass while its stop-gradient keeps the backward pass
// unscaled, so deep layers see a smaller stream without weaker gradients below them.
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
constexpr Switch kSwitches[] = {{kGpasPerSublayer, "false", "one gate per sub-layer instead of one per layer (code)"}};

TensorId gpas(const SubLayer& s, TensorId h) {
  TensorId gate = s.scalar(kGpasGate, 0.0, !s.flag(kGpasPerSublayer));
  return s.gpas(pre_ln(s, h), gate, "gated");
}
}  // namespace

extern const Placement kGpas{
    .name = "gpas",
    .display_name = "GPAS",
    .paper = "Chen et al. 2025, GPAS: Gradient-Preserving Activation Scaling (arXiv 2506.22049)",
    .equations = "h = G(x + Attn(Norm(x)));  x' = G(h + FFN(Norm(h)));  G(z) = z − SiLU(a)·sg(z), one a per layer",
    .defaults = R"({"norm": {"type": "rmsnorm", "eps": 1e-6}})",
    .switches = kSwitches,
    .sublayer = gpas,
    .init_rule = "a = 0 (G is the identity at init)",
    .notes = "one gate per layer after both adds (code); the paper's text says after each sub-layer: gpas_per_sublayer",
};

}  // namespace normlab::model
