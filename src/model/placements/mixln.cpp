// Mix-LN: Li, Yin & Liu, "Mix-LN: Unleashing the Power of Deeper Layers by Combining Pre-LN and
// Post-LN", ICLR 2025 (arXiv 2412.13795). §2.19
//
//   layers i < ⌊ρL⌋:  h ← Norm(h + F(h))        (Post-LN: strong gradients in the shallow layers)
//   other layers:      h ← h + F(Norm(h))        (Pre-LN: the deep layers keep learning)
#include <cmath>

#include "model/placements/variants.h"

namespace normlab::model {

namespace {
constexpr Switch kSwitches[] = {
    {"mixln_ratio", "0.25", "ρ: the fraction of layers, from the bottom, that are Post-LN"}};

TensorId mixln(const SubLayer& s, TensorId h) {
  const int post_layers = static_cast<int>(std::floor(s.number("mixln_ratio") * s.layers()));
  return s.index() < post_layers ? post_ln(s, h) : pre_ln(s, h);
}
}  // namespace

extern const Placement kMixLn{
    .name = "mixln",
    .display_name = "Mix-LN",
    .paper = "Li et al. 2025, Mix-LN (arXiv 2412.13795)",
    .equations = "layers i < ⌊ρL⌋: Post-LN;  the rest: Pre-LN;  final norm",
    // LLaMA-based code: an untied head (else the embedding's large σ would also be the head's) and RoPE
    .defaults = R"({"norm": {"type": "rmsnorm", "eps": 1e-6}, "init": {"embed_std": 0.6324555320336759},
                    "tied_embeddings": false, "positions": "rope"})",
    .switches = kSwitches,
    .sublayer = mixln,
    .init_rule = "embeddings N(0, √(2/5)) as the Mix-LN repo (\"Spike No More\")",
};

}  // namespace normlab::model
