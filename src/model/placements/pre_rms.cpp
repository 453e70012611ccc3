// Pre-RMSNorm and Pre-CRMSNorm: Jiang et al., "Pre-RMSNorm and Pre-CRMSNorm Transformers:
// Equivalent and Efficient Pre-LN Transformers", NeurIPS 2023 (arXiv 2305.14858). §2.15, §1.3
//
//   Pre-RMSNorm:   h ← h + center(F(RMS(h)))           embedding centered too
//   Pre-CRMSNorm:  h ← h + F(CRMS(h)) on the compressed stream: d − 1 coordinates, the last being −Σ
//
// If everything written into the stream has zero mean, LN(z) = RMSNorm(z): the main branch is kept
// zero-mean by its effective output weight W − mean over the output axis (engine/ops/linear.cpp, centered; with
// dropout, which would undo it, by a centering pass after the dropout), so the model computes exactly Pre-LN. A
// zero-mean vector is fully described by d − 1 coordinates, which is what the compressed form stores; CRMSNorm then
// normalizes as if the last coordinate were there.
#include "model/placements/variants.h"

namespace normlab::model {

extern const Placement kPreRms{
    .name = "pre_rms",
    .display_name = "Pre-RMSNorm",
    .paper = "Jiang et al. 2023, Pre-RMSNorm and Pre-CRMSNorm Transformers (arXiv 2305.14858)",
    .equations = "h = x + center(Attn(RMS(x)));  x' = h + center(FFN(RMS(h)));  embedding centered",
    .defaults = R"({"norm": {"type": "rmsnorm"}})",
    .sublayer = pre_ln,
    .notes = "equivalent to Pre-LN with bias-free LayerNorm (test: logits within 1e-5)",
    .zero_mean_branch = true,
};

extern const Placement kPreCrms{
    .name = "pre_crms",
    .display_name = "Pre-CRMSNorm",
    .paper = "Jiang et al. 2023, Pre-RMSNorm and Pre-CRMSNorm Transformers (arXiv 2305.14858)",
    .equations = "stream of width d−1 (last coordinate = −Σ);  h = x + Attn(CRMS(x));  x' = h + FFN(CRMS(h))",
    .defaults = R"({"norm": {"type": "crmsnorm"}, "tied_embeddings": false})",
    .sublayer = pre_ln,
    .notes =
        "non-affine CRMSNorm (gains fold into the next linear map); convert a Pre-LN model with model/crms_convert.h",
    .compressed_stream = true,
};

}  // namespace normlab::model
