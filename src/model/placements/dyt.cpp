// DyT: Zhu, Chen, He, LeCun & Liu, "Transformers without Normalization", CVPR 2025
// (arXiv 2503.10622). §2.22
//
//   h ← h + F(DyT(h)),   DyT(x) = γ ⊙ tanh(α x) + β,  α one scalar (α₀ = 0.5);  final DyT
//
// Every norm of a Pre-LN model replaced one-for-one by an elementwise squashing function.
//
// Default init: unit-variance embeddings, N(0, d^(−1/2)) × √d. tanh(αx) only normalizes when x is
// not tiny: under GPT-2's N(0, 0.02) embeddings every α₀ from 0.1 to 4 stalled at the unigram level
// (dyt-alpha study, measured). The paper's LLaMA code multiplies the embedding by a scalar initialized
// to √d (there with a learnable scalar, `embed_scale = learned`).
#include "model/placements/variants.h"

namespace normlab::model {

extern const Placement kDyT{
    .name = "dyt",
    .display_name = "DyT",
    .paper = "Zhu et al. 2025, Transformers without Normalization (arXiv 2503.10622)",
    .equations = "h = x + Attn(DyT(x));  x' = h + FFN(DyT(h));  DyT(x) = γ·tanh(αx) + β;  final DyT",
    .defaults = R"({"norm": {"type": "dyt"}, "embed_scale": "sqrt_d", "init": {"embed_std": 0}})",
    .sublayer = pre_ln,
    .init_rule =
        "α = options.dyt_alpha (0.5; per-slot dyt_alpha_attn/ffn/final), γ = 1, β = 0; embeddings N(0, d^(-1/2)) × √d "
        "(unit variance: embed_std 0, embed_scale sqrt_d); matrices by model.init (GPT-2 N(0, 0.02))",
    .init_source =
        "the paper for α₀ (0.5; per-size values for its LLaMA models); unit-variance embeddings from the paper's LLaMA "
        "code (embedding × a scalar "
        "initialized to √d) — under N(0, 0.02) embeddings DyT stalls at every α₀ (dyt-alpha study)",
    .notes = "LLaMA form: norm.bias = false and embed_scale = learned (a scalar √d on the embedding)",
};

}  // namespace normlab::model
