// Peri-LN: Kim et al., "Peri-LN: Revisiting Normalization Layer in the Transformer Architecture",
// ICML 2025 (arXiv 2502.02732). §2.18
//
//   h ← h + Norm_out(F(Norm_in(h)))
//
// Norms around the module, none on the stream: the output norm damps a branch's massive activations
// before they are added. (Beware: this is NOT a norm after the add.) No official code exists.
#include "model/placements/variants.h"

namespace normlab::model {

TensorId peri_ln(const SubLayer& s, TensorId h) { return s.add(h, s.norm("out_norm", s.branch(s.norm("in_norm", h)))); }

extern const Placement kPeriLn{
    .name = "peri",
    .display_name = "Peri-LN",
    .paper =
        "Kim et al. 2025, Peri-LN: Revisiting Normalization Layer in the Transformer Architecture (arXiv 2502.02732)",
    .equations = "h = x + Norm(Attn(Norm(x)));  x' = h + Norm(FFN(Norm(h)))",
    .sublayer = peri_ln,
    .notes = "no official code; set embed_norm = true for the paper's optional embedding norm",
};

}  // namespace normlab::model
