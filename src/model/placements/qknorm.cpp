// QKNorm: Henry et al., "Query-Key Normalization for Transformers", Findings of EMNLP 2020
// (arXiv 2010.04245). §2.9
//
//   q̂ = q/‖q‖, k̂ = k/‖k‖ per head;  logits = g · q̂ k̂ᵀ  (g learnable, replaces 1/√D)
//
// on a Pre-LN block: h ← h + F(Norm(h)). g starts at log2(T² − T), T the sequence length.
// The other QK-norm placements (OLMo-2 full-width, HybridNorm per head) are the qk_norm switch.
#include "model/placements/variants.h"

namespace normlab::model {

extern const Placement kQkNorm{
    .name = "qknorm",
    .display_name = "QK-norm",
    .paper = "Henry et al. 2020, Query-Key Normalization for Transformers (arXiv 2010.04245)",
    .equations = "h = x + Attn(Norm(x)) with logits g·(q/‖q‖)(k/‖k‖)ᵀ per head;  x' = h + FFN(Norm(h))",
    .defaults = R"({"options": {"qk_norm": "l2"}})",
    .sublayer = pre_ln,
    .init_rule = "g = log2(T² − T), T = max_seq_len (the paper: the 97.5th-percentile training length)",
};

}  // namespace normlab::model
