// T-Fixup: Huang, Perez, Ba & Volkovs, "Improving Transformer Optimization Through Better
// Initialization", ICML 2020. §2.5
//
//   h ← h + F(h)          (every LayerNorm removed, the final one too)
//
// Stability comes from the init alone: Xavier matrices, then v, o and the FFN scaled by (9L)^(−1/4)
// (the decoder rule, L = M layers) and the embeddings N(0, d^(−1/2)) scaled by the same factor; as in
// fairseq, the token embedding is multiplied by √d at the input (default embed_scale = sqrt_d).
#include <cmath>

#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
using engine::Role;

TensorId tfixup(const SubLayer& s, TensorId h) { return s.add(h, s.branch(h)); }

void tfixup_init(InitContext& ctx) {
  Model& m = ctx.model;
  const double factor = std::pow(9.0 * m.config.n_layers, -0.25);
  redraw_xavier(m, {Role::q, Role::k, Role::v, Role::o, Role::fc1, Role::gate, Role::fc2, Role::head}, 1.0, false,
                ctx.seed);
  scale_roles(m, {Role::v, Role::o, Role::fc1, Role::gate, Role::fc2}, factor);
  redraw_normal(m, {Role::embedding}, std::pow(m.config.d_model, -0.5) * factor, ctx.seed);
}
}  // namespace

extern const Placement kTFixup{
    .name = "tfixup",
    .paper = "Huang et al. 2020, Improving Transformer Optimization Through Better Initialization (ICML 2020)",
    .equations = "h = x + Attn(x);  x' = h + FFN(h);  no norms",
    .final_norm = false,
    .defaults = R"({"norm": {"type": "none"}, "embed_scale": "sqrt_d"})",
    .sublayer = tfixup,
    .init = tfixup_init,
    .init_rule =
        "Xavier-uniform; v, o, fc1, gate, fc2 × (9L)^(-1/4); embeddings N(0, d^(-1/2))·(9L)^(-1/4), the token "
        "embedding × √d at the input (embed_scale sqrt_d)",
    .init_source =
        "Huang et al. 2020 §3 (decoder rule); layer6ai-labs/T-Fixup fixup_initialization on fairseq, whose "
        "TransformerDecoder scales the token embedding by √d (embed_scale = sqrt(embed_dim))",
    .notes =
        "decoder-only: the decoder's (9M)^(-1/4) rule; V's extra √2 in the code undoes fairseq's 1/√2 gain, so it is "
        "omitted here",
};

}  // namespace normlab::model
