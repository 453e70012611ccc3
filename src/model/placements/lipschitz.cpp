// Lipschitz-constrained initialization: Xu et al., "Lipschitz Constrained Parameter Initialization
// for Deep Transformers", ACL 2020 (arXiv 1911.03179). §2.6
//
//   u = Norm(h);  h ← u + F(u)          ("v1", Post-LN in the author's shifted form: the residual is
//                                         taken from the normalized input), plus a final norm
//
// With the final norm the stack computes classic Post-LN; the init keeps every matrix small:
// U(±1/√fan_in), embeddings U(±√(2/(V + d))).
#include <cmath>

#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
using engine::Role;

TensorId lipschitz(const SubLayer& s, TensorId h) {
  TensorId u = s.norm("in_norm", h);
  return s.add(u, s.branch(u));
}

void lipschitz_init(InitContext& ctx) {
  Model& m = ctx.model;
  for (Role r : {Role::q, Role::k, Role::v, Role::o, Role::fc1, Role::gate, Role::fc2, Role::head}) {
    const double fan_in = r == Role::fc2 ? m.config.d_ff : m.config.stream_width();
    redraw_uniform(m, {r}, 1.0 / std::sqrt(fan_in), ctx.seed);
  }
  redraw_uniform(m, {Role::embedding}, std::sqrt(2.0 / (m.config.vocab_size + m.config.d_model)), ctx.seed);
}
}  // namespace

extern const Placement kLipschitz{
    .name = "lipschitz",
    .display_name = "Lipschitz",
    .paper = "Xu et al. 2020, Lipschitz Constrained Parameter Initialization for Deep Transformers (arXiv 1911.03179)",
    .equations = "u = Norm(x); h = u + Attn(u);  v = Norm(h); x' = v + FFN(v);  final norm",
    .defaults = R"({"norm": {"eps": 1e-6}})",
    .sublayer = lipschitz,
    .init = lipschitz_init,
    .init_rule = "matrices U(±1/√fan_in); embeddings U(±√(2/(V+d))); biases 0",
    .notes = "the author's Neutron code (v1 computation order); the paper's constants were not re-read",
};

}  // namespace normlab::model
