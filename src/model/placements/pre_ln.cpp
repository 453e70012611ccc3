// Pre-LN: Xiong et al., "On Layer Normalization in the Transformer Architecture", ICML 2020
// (arXiv 2002.04745); earlier Wang et al. 2019 and Nguyen & Salazar 2019. §2.2
//
//   h ← h + F(Norm(h))
//
// The norm sits on the branch input; the residual stream is never normalized, so its variance grows
// with depth, and a final norm is required before the head.
#include "model/placements/variants.h"

namespace normlab::model {

TensorId pre_ln(const SubLayer& s, TensorId h) { return s.add(h, s.branch(s.norm("in_norm", h))); }

extern const Placement kPreLn{
    .name = "pre",
    .display_name = "Pre-LN",
    .paper = "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture (arXiv 2002.04745)",
    .equations = "h = x + Attn(Norm(x));  x' = h + FFN(Norm(h))",
    .sublayer = pre_ln,
    .converts_to_crms = true,
};

}  // namespace normlab::model
