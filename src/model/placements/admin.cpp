// Admin: Liu et al., "Understanding the Difficulty of Training Transformers", EMNLP 2020
// (arXiv 2004.08249). §2.7
//
//   h ← Norm(ω ⊙ h + F(h))           ω a learnable d-vector per sub-layer
//
// Post-LN whose shortcut is up-weighted so that no residual branch dominates the output change.
// ω starts at the profiled √(Σ_{j<i} Var f_j) ("profile": one forward pass per sub-layer, as the
// authors' code), or at admin-torch's closed form √((N+1)/ln(N+1) − 1), N = 2L ("log", default). In an
// encoder-decoder N counts the sub-layers of ω's own stack (2N encoder, 3M decoder: admin-torch's num_res_layers),
// and the profiling pass runs through the encoder, then the decoder, carrying its running sum across.
#include <cmath>

#include "model/init.h"
#include "model/placements/variants.h"
#include "model/transformer.h"

namespace normlab::model {

namespace {
constexpr Switch kSwitches[] = {{"admin_omega", "\"log\"",
                                 "log: √((N+1)/ln(N+1) − 1), O(log N) output change (admin-torch default) | profile: "
                                 "Liu et al.'s profiling pass | linear: 1, O(N) (plain Post-LN) | constant: √N, O(1)",
                                 "log|profile|linear|constant"}};

TensorId admin(const SubLayer& s, TensorId h) {
  TensorId omega = s.vector("admin_omega", s.config().stream_width(), 1.0);
  return s.norm("post_norm", s.scale_add(s.branch(h), h, omega, "residual"));
}

double variance(const Model& m, engine::TensorId id) {
  const int64_t n = m.graph.shape(id).numel();
  double sum = 0, sq = 0;
  engine::dispatch_float(m.graph.float_type(), [&]<typename T>() {
    const T* d = m.graph.data<T>(id);
    for (int64_t i = 0; i < n; ++i) sum += d[i], sq += double(d[i]) * d[i];
  });
  const double mean = sum / static_cast<double>(n);
  return sq / static_cast<double>(n) - mean * mean;
}

// The profiling pass, in sub-layer order: ω_i ← ratio, one forward, then
// ratio ← √(Var[ω_i ⊙ x_{i−1}] + Var[f_i]), variances over all elements (the authors' code).
void profile(InitContext& ctx) {
  Model& m = ctx.model;
  m.set_batch(ctx.tokens, ctx.targets);
  double ratio = 1.0;
  for (const SubLayerSite& site : sublayer_sites(m.config)) {
    fill_constant(m, site.prefix + ".admin_omega", ratio);
    m.forward(false);
    // The residual node is scale_add(f_i, x_{i−1}, ω_i): read its two inputs.
    const engine::TensorId residual = m.graph.at(site.prefix + ".residual");
    for (const engine::Node& n : m.graph.nodes())
      if (n.out == residual) ratio = std::sqrt(ratio * ratio * variance(m, n.in[1]) + variance(m, n.in[0]));
  }
}

void admin_init(InitContext& ctx) {
  Model& m = ctx.model;
  const std::string mode = option(m.config, "admin_omega").get<std::string>();
  if (mode == "profile") return profile(ctx);
  for (const SubLayerSite& site : sublayer_sites(m.config)) {
    const double n = site.stack_sublayers;
    const double omega = mode == "linear"     ? 1.0
                         : mode == "constant" ? std::sqrt(n)
                                              : std::sqrt((n + 1) / std::log(n + 1) - 1);
    fill_constant(m, site.prefix + ".admin_omega", omega);
  }
}
Json admin_export_constants(const ModelConfig&) {
  return {{"admin_omega",
           "learned, in the weights: <stack>layers.{i}.{attn,cross,ffn}.admin_omega [d], the shortcut's weight in "
           "h ← LN(ω ⊙ h + F(h)); initialized by options.admin_omega"}};
}
}  // namespace

extern const Placement kAdmin{
    .name = "admin",
    .display_name = "Admin",
    .paper = "Liu et al. 2020, Understanding the Difficulty of Training Transformers (arXiv 2004.08249)",
    .equations = "h = Norm(ω ⊙ x + Attn(x));  x' = Norm(ω ⊙ h + FFN(h));  ω learnable per sub-layer",
    .final_norm = false,
    // fairseq's conventions, which the profiling rule presumes: embeddings N(0, d^(-1/2)) scaled by √d, Xavier layers
    .defaults = R"({"embed_scale": "sqrt_d", "init": {"scheme": "xavier", "embed_std": 0}})",
    .switches = kSwitches,
    .sublayer = admin,
    .init = admin_init,
    .init_rule = "ω = √((N+1)/ln(N+1) − 1), N = 2L (admin_omega = log; encoder-decoder: 2N and 3M), or profiled",
    .export_constants = admin_export_constants,
};

}  // namespace normlab::model
