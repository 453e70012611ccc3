// DyT: Zhu, Chen, He, LeCun & Liu, "Transformers without Normalization", CVPR 2025
// (arXiv 2503.10622). §2.22
//
//   h ← h + F(DyT(h)),   DyT(x) = γ ⊙ tanh(α x) + β,  α one scalar (α₀ = 0.5);  final DyT
//
// Every norm of a Pre-LN model replaced one-for-one by an elementwise squashing function.
#include "model/placements/variants.h"

namespace normlab::model {

extern const Placement kDyT{
    .name = "dyt",
    .paper = "Zhu et al. 2025, Transformers without Normalization (arXiv 2503.10622)",
    .equations = "h = x + Attn(DyT(x));  x' = h + FFN(DyT(h));  DyT(x) = γ·tanh(αx) + β;  final DyT",
    .defaults = R"({"norm": {"type": "dyt"}})",
    .sublayer = pre_ln,
    .init_rule = "α = options.dyt_alpha (0.5; per-slot dyt_alpha_attn/ffn/final), γ = 1, β = 0",
    .notes = "LLaMA form: norm.bias = false and embed_scale = learned (a scalar √d on the embedding)",
};

}  // namespace normlab::model
