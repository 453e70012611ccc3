// Sandwich-LN: Ding et al., "CogView: Mastering Text-to-Image Generation via Transformers",
// NeurIPS 2021 (arXiv 2105.13290). §2.10
//
//   h ← h + LN_out(F(LN_in(h)))          (the same shape as Peri-LN and Gemma 2)
//
// with Megatron's scaled init (outputs σ/√(2L)), and PB-relax as a switch: every LN input divided
// by max|x|/8 over the whole tensor (the code's form; the paper writes max|x|).
#include <cmath>

#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
// L is the depth of the stack that holds the matrix (an encoder-decoder: N in the encoder, M in the decoder).
void scaled_outputs(InitContext& ctx) {
  Model& m = ctx.model;
  for (const StackSpec& t : stacks(m.config))
    redraw_normal(m, {engine::Role::o, engine::Role::fc2}, m.config.init.std / std::sqrt(2.0 * t.layers), ctx.seed,
                  t.prefix());
}
}  // namespace

extern const Placement kSandwich{
    .name = "sandwich",
    .display_name = "Sandwich-LN",
    .paper = "Ding et al. 2021, CogView (arXiv 2105.13290)",
    .equations = "h = x + LN(Attn(LN(x)));  x' = h + LN(FFN(LN(h)))",
    .sublayer = peri_ln,
    .init = scaled_outputs,
    .init_rule = "o, fc2: N(0, std/√(2L)), L the depth of their stack",
    .notes =
        "PB-relax (options.pb_relax) follows the code (÷ max|x|/8); the attention relaxation is off, as in the code",
};

}  // namespace normlab::model
