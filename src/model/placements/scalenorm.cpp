// ScaleNorm: Nguyen & Salazar, "Transformers without Tears: Improving the Normalization of
// Self-Attention", IWSLT 2019 (arXiv 1910.05895). §2.8
//
//   h ← h + F(SN(h)),   SN(x) = g · x / max(‖x‖₂, ε),  g one scalar = √d at init;  final SN
//
// Pre-Norm with one learnable length instead of LayerNorm's per-channel gains, and "SmallInit".
#include <cmath>

#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
using engine::Role;

void small_init(InitContext& ctx) {
  Model& m = ctx.model;
  const double d = m.config.d_model, ff = m.config.d_ff;
  redraw_normal(m, {Role::q, Role::k, Role::v, Role::o}, std::sqrt(2.0 / (5.0 * d)), ctx.seed);
  redraw_normal(m, {Role::fc1, Role::gate, Role::fc2}, std::sqrt(2.0 / (ff + d)), ctx.seed);
}
}  // namespace

extern const Placement kScaleNormPre{
    .name = "scalenorm",
    .display_name = "ScaleNorm",
    .paper = "Nguyen & Salazar 2019, Transformers without Tears (arXiv 1910.05895)",
    .equations = "h = x + Attn(SN(x));  x' = h + FFN(SN(h));  SN(x) = g·x/‖x‖, g = √d;  final SN",
    .defaults = R"({"norm": {"type": "scalenorm"}})",
    .sublayer = pre_ln,
    .init = small_init,
    .init_rule = "SmallInit: q, k, v, o N(0, √(2/(5d))); FFN N(0, √(2/(d_ff+d))); g = √d",
    .notes = "FixNorm (fixed-length word embeddings) from the same paper is not included",
};

}  // namespace normlab::model
