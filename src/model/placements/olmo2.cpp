// OLMo 2: OLMo Team, "2 OLMo 2 Furious" (arXiv 2501.00656). §2.17
//
//   q ← RMS(q), k ← RMS(k) over the full width (before the head split and RoPE)
//   h ← h + RMS_out(F(h))            no input norm: the stream is never normalized inside the stack
//
// The "reordered norm": Peri-LN without its input norms, plus QK-norm.
#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
using engine::Role;

TensorId olmo2(const SubLayer& s, TensorId h) { return s.add(h, s.norm("out_norm", s.branch(h))); }

// init_fn "normal": every weight N(0, init_std) truncated at ±3σ, no depth scaling; norms 1, no biases.
void olmo2_init(InitContext& ctx) {
  Model& m = ctx.model;
  redraw_truncated_normal(
      m, {Role::q, Role::k, Role::v, Role::o, Role::fc1, Role::gate, Role::fc2, Role::head, Role::embedding},
      m.config.init.std, ctx.seed);
}
}  // namespace

extern const Placement kOlmo2{
    .name = "olmo2",
    .display_name = "OLMo 2 (reordered norm)",
    .paper = "OLMo Team 2025, 2 OLMo 2 Furious (arXiv 2501.00656)",
    .equations = "h = x + RMS(Attn(x)) with full-width RMS on q, k;  x' = h + RMS(FFN(h))",
    .defaults = R"({"norm": {"type": "rmsnorm", "eps": 1e-6}, "activation": "swiglu", "bias": false,
                    "options": {"qk_norm": "full"}})",
    .sublayer = olmo2,
    .init = olmo2_init,
    .init_rule =
        "every matrix and embedding N(0, σ²) truncated at ±3σ, σ = model.init.std (0.02), no depth scaling "
        "(realized std 0.9866σ)",
    .init_source = "OLMo 2 code: init_fn normal, init_std 0.02, trunc_normal_ at ±3σ (spec §2.17)",
    .notes = "z-loss is not included",
};

}  // namespace normlab::model
