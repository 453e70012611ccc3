// T-Fixup: Huang, Perez, Ba & Volkovs, "Improving Transformer Optimization Through Better
// Initialization", ICML 2020. §2.5
//
//   h ← h + F(h)          (every LayerNorm removed, the final one too)
//
// Stability comes from the init alone: Xavier matrices, then v, o and the FFN scaled by (9L)^(−1/4)
// (the decoder rule, L = M layers) and the embeddings N(0, d^(−1/2)) scaled by the same factor; as in
// fairseq, the token embedding is multiplied by √d at the input (default embed_scale = sqrt_d).
// In an encoder-decoder (N encoder, M decoder layers) each stack has its own factor, as fixup_initialization
// in layer6ai-labs/T-Fixup applies them: the encoder's v, o, fc1, fc2 × 0.67·N^(−1/4), the decoder's (self- and
// cross-attention v and o, fc1, fc2) × (9M)^(−1/4); the embeddings that the encoder reads × (9N)^(−1/4): the token
// table is shared by both stacks, and shared embeddings take the encoder's factor only; the decoder's own
// position table takes the decoder's (9M)^(−1/4).
#include <cmath>

#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
using engine::Role;

TensorId tfixup(const SubLayer& s, TensorId h) { return s.add(h, s.branch(h)); }

void tfixup_init(InitContext& ctx) {
  Model& m = ctx.model;
  const RoleSet branch = {Role::v, Role::o, Role::fc1, Role::gate, Role::fc2};
  const double decoder = std::pow(9.0 * m.config.n_layers, -0.25), embed_std = std::pow(m.config.d_model, -0.5);
  redraw_xavier(m, {Role::q, Role::k, Role::v, Role::o, Role::fc1, Role::gate, Role::fc2, Role::head}, 1.0, false,
                ctx.seed);
  if (!m.config.encoder_decoder()) {
    scale_roles(m, branch, decoder);
    redraw_normal(m, {Role::embedding}, embed_std * decoder, ctx.seed);
    return;
  }
  const double n = m.config.source_layers();
  scale_roles(m, branch, 0.67 * std::pow(n, -0.25), false, StackSpec{StackSpec::encoder}.prefix());
  scale_roles(m, branch, decoder, false, StackSpec{StackSpec::decoder}.prefix());
  redraw_normal(m, {Role::embedding}, embed_std * std::pow(9.0 * n, -0.25), ctx.seed);
  redraw_normal(m, {Role::embedding}, embed_std * decoder, ctx.seed, StackSpec{StackSpec::decoder}.prefix());
}
}  // namespace

extern const Placement kTFixup{
    .name = "tfixup",
    .display_name = "T-Fixup",
    .paper = "Huang et al. 2020, Improving Transformer Optimization Through Better Initialization (ICML 2020)",
    .equations = "h = x + Attn(x);  x' = h + FFN(h);  no norms",
    .final_norm = false,
    .defaults = R"({"norm": {"type": "none"}, "embed_scale": "sqrt_d"})",
    .sublayer = tfixup,
    .init = tfixup_init,
    .init_rule =
        "Xavier-uniform; v, o, fc1, gate, fc2 × (9L)^(-1/4); embeddings N(0, d^(-1/2))·(9L)^(-1/4), the token "
        "embedding × √d at the input (embed_scale sqrt_d). Encoder-decoder: encoder v, o, fc1, fc2 × "
        "0.67·N^(-1/4), decoder (cross-attention too) × (9M)^(-1/4); the shared token table and the encoder's "
        "positions × (9N)^(-1/4), the decoder's positions × (9M)^(-1/4)",
    .init_source =
        "Huang et al. 2020 §3 (decoder rule); layer6ai-labs/T-Fixup fixup_initialization on fairseq (both stacks, "
        "shared embeddings at the encoder's factor), whose TransformerDecoder scales the token embedding by √d "
        "(embed_scale = sqrt(embed_dim))",
    .notes = "V's extra √2 in the code undoes fairseq's 1/√2 gain, so it is omitted here",
};

}  // namespace normlab::model
