// Dynamic Tanh (Zhu, Chen, He, LeCun & Liu 2025, "Transformers without Normalization"): an
// element-wise squashing with a learnable input scale α in place of a norm; no statistics at all.
#include "model/norm.h"

namespace normlab::model {
namespace {

constexpr NormParam kParams[] = {{"alpha", "α = options.dyt_alpha (per slot: dyt_alpha_attn/ffn/final)"},
                                 {"weight", "γ = 1"},
                                 {"bias", "β = 0 (only with model.norm.bias)"}};

TensorId build(Graph& g, const NormArgs& a) {
  TensorId alpha = g.parameter(a.name + ".alpha", engine::Shape{1}, engine::Role::scalar, false, a.dyt_alpha);
  TensorId gamma = norm_gain(g, a, 1.0);
  return engine::dyt(g, a.name + ".out", a.x, alpha, gamma, norm_bias(g, a));
}

// DyT has no σ: its scale is α, the slope of tanh(αx) at 0.
double inv_sigma(const Graph& g, const engine::Node& n) {
  double alpha = 0;
  engine::dispatch_float(g.float_type(), [&]<typename T>() { alpha = *g.data<T>(n.in[1]); });
  return alpha;
}

}  // namespace

extern const NormType kDytType{
    .name = "dyt",
    .paper = "Zhu, Chen, He, LeCun & Liu 2025, Transformers without Normalization",
    .equation = "y = γ ⊙ tanh(α x) + β",
    .params = kParams,
    .op = engine::OpKind::dyt,
    .build = build,
    .inv_sigma = inv_sigma,
};

}  // namespace normlab::model
