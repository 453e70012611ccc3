// Post-LN: Vaswani et al., "Attention Is All You Need", NeurIPS 2017 (arXiv 1706.03762). §2.1
//
//   h ← Norm(h + F(h))
//
// The norm sits on the residual stream itself, after the add, so every gradient reaching a lower
// layer passes through each LayerNorm Jacobian above it. No final norm: the last sub-layer already
// ends in one (fairseq and torchscale create none when normalize_before is false).
#include "model/placements/variants.h"

namespace normlab::model {

TensorId post_ln(const SubLayer& s, TensorId h) { return s.norm("post_norm", s.add(h, s.branch(h))); }

extern const Placement kPostLn{
    .name = "post",
    .display_name = "Post-LN",
    .paper = "Vaswani et al. 2017, Attention Is All You Need (arXiv 1706.03762)",
    .equations = "h = Norm(x + Attn(x));  x' = Norm(h + FFN(h))",
    .final_norm = false,
    .sublayer = post_ln,
    .notes =
        "LLaMA-based research repos (Mix-LN, LNS, GPAS) keep a final norm in their post mode: set final_norm = true",
};

}  // namespace normlab::model
