// Sub-LN (Magneto): Wang et al., "Foundation Transformers" (arXiv 2210.06423). §2.13
//
//   attn:  h ← h + W_O · LN_inner(MHA(LN_in(h)))
//   ffn:   h ← h + fc2(LN_mid(φ(fc1 LN_in(h))))
//
// Pre-LN plus a norm inside each sub-layer, right before its output projection, and an init that
// scales v, o and the FFN (weights and biases) up by γ = √(ln 2L). Cross-attention has no inner norm: torchscale
// adds it only where `subln and self_attention`.
#include <cmath>

#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
using engine::Role;

TensorId subln(const SubLayer& s, TensorId h) {
  return s.add(
      h, s.branch(s.norm("in_norm", h), {.inner_norm = s.kind() == Branch::attn, .mid_norm = s.kind() == Branch::ffn}));
}

// γ per stack (§2.13, torchscale's encoder.py / decoder.py): one stack of L layers √(ln 2L); an encoder-decoder's
// encoder √(ln(3M)·ln(2N)/3) and decoder √(ln 3M). torchscale's decoder skips `encoder_attn` when it scales, so the
// cross-attention's v and o keep their base init (its DeepNorm scaling, by contrast, covers them).
void subln_init(InitContext& ctx) {
  Model& m = ctx.model;
  const double n = m.config.source_layers(), M = m.config.n_layers;
  for (const StackSpec& t : stacks(m.config)) {
    const double gamma = t.kind == StackSpec::single    ? std::sqrt(std::log(2.0 * t.layers))
                         : t.kind == StackSpec::encoder ? std::sqrt(std::log(3.0 * M) * std::log(2.0 * n) / 3.0)
                                                        : std::sqrt(std::log(3.0 * M));
    for (int i = 0; i < t.layers; ++i)
      for (Branch b : {Branch::attn, Branch::ffn})
        scale_roles(m, {Role::v, Role::o, Role::fc1, Role::gate, Role::fc2}, gamma, true,
                    fmt::format("{}layers.{}.{}.", t.prefix(), i, branch_name(b)));
  }
}
}  // namespace

extern const Placement kSubLn{
    .name = "subln",
    .display_name = "Sub-LN",
    .paper = "Wang et al. 2022, Foundation Transformers / Magneto (arXiv 2210.06423)",
    .equations = "h = x + W_O·LN(MHA(LN(x)));  x' = h + W2·LN(φ(W1·LN(h)))",
    .sublayer = subln,
    .init = subln_init,
    .init_rule =
        "v, o, fc1, gate, fc2 (weights and biases) × γ = √(ln 2L); encoder-decoder: encoder γ = √(ln(3M)·ln(2N)/3), "
        "decoder γ = √(ln 3M), cross-attention unscaled (torchscale)",
};

}  // namespace normlab::model
