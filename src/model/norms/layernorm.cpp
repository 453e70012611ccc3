// LayerNorm (Ba, Kiros & Hinton 2016, "Layer Normalization"): centre, then divide by the standard
// deviation; the original Transformer's norm and GPT-2's.
#include "model/norm.h"

namespace normlab::model {
namespace {

constexpr NormParam kParams[] = {{"weight", "γ = 1"}, {"bias", "β = 0 (only with model.norm.bias)"}};

TensorId build(Graph& g, const NormArgs& a) {
  TensorId gamma = norm_gain(g, a, 1.0);
  return engine::layer_norm(g, a.name + ".out", a.x, gamma, norm_bias(g, a), a.eps);
}

double inv_sigma(const Graph& g, const engine::Node& n) { return mean_of_saved(g, n.saved[1]); }  // saved: μ, 1/σ

}  // namespace

extern const NormType kLayerNormType{
    .name = "layernorm",
    .paper = "Ba, Kiros & Hinton 2016, Layer Normalization",
    .equation = "y = γ ⊙ (x − μ)/√(σ² + ε) + β",
    .params = kParams,
    .op = engine::OpKind::layer_norm,
    .build = build,
    .inv_sigma = inv_sigma,
};

}  // namespace normlab::model
