// OLMo 2: OLMo Team, "2 OLMo 2 Furious" (arXiv 2501.00656). §2.17
//
//   q ← RMS(q), k ← RMS(k) over the full width (before the head split and RoPE)
//   h ← h + RMS_out(F(h))            no input norm: the stream is never normalized inside the stack
//
// The "reordered norm": Peri-LN without its input norms, plus QK-norm.
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
TensorId olmo2(const SubLayer& s, TensorId h) { return s.add(h, s.norm("out_norm", s.branch(h))); }
}  // namespace

extern const Placement kOlmo2{
    .name = "olmo2",
    .paper = "OLMo Team 2025, 2 OLMo 2 Furious (arXiv 2501.00656)",
    .equations = "h = x + RMS(Attn(x)) with full-width RMS on q, k;  x' = h + RMS(FFN(h))",
    .defaults = R"({"norm": {"type": "rmsnorm", "eps": 1e-6}, "activation": "swiglu", "bias": false,
                    "options": {"qk_norm": "full"}})",
    .sublayer = olmo2,
    .init_rule = "N(0, 0.02) everywhere, no depth scaling (the code truncates at ±3σ; not done here)",
    .notes = "z-loss is not included",
};

}  // namespace normlab::model
