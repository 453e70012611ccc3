// Gemma 2: Gemma Team, "Gemma 2: Improving Open Language Models at a Practical Size"
// (arXiv 2408.00118). §2.16
//
//   e = Embed(tokens)·√d;   h ← h + RMS_out(F(RMS_in(h)))   with RMSNorm (1 + s), s = 0 at init
//
// Peri-LN with Gemma's unit-offset RMSNorm, GeGLU, and tanh soft-caps on attention (50) and final
// (30) logits.
#include "model/placements/variants.h"

namespace normlab::model {

extern const Placement kGemma2{
    .name = "gemma2",
    .display_name = "Gemma 2 (sandwich RMSNorm)",
    .paper = "Gemma Team 2024, Gemma 2 (arXiv 2408.00118)",
    .equations = "e = Embed·√d;  h = x + RMS(Attn(RMS(x)));  x' = h + RMS(GeGLU(RMS(h)));  soft-caps 50/30",
    .defaults = R"({"norm": {"type": "rmsnorm_gemma", "eps": 1e-6}, "embed_scale": "sqrt_d", "activation": "geglu",
                    "bias": false, "options": {"attn_softcap": 50.0, "final_softcap": 30.0}})",
    .sublayer = peri_ln,
    .init_rule = "RMSNorm scale s = 0 (effective gain 1)",
    .notes = "exact-erf GELU in GeGLU; query scaling 1/√D (query_pre_attn_scalar of the 2B/9B models)",
};

}  // namespace normlab::model
