// RMSNorm (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"): LayerNorm without the
// centring or β; Llama's, Qwen's and DeepSeek's norm.
#include "model/norm.h"

namespace normlab::model {
namespace {

constexpr NormParam kParams[] = {{"weight", "γ = 1"}};

TensorId build(Graph& g, const NormArgs& a) {
  return engine::rms_norm(g, a.name + ".out", a.x, norm_gain(g, a, 1.0), a.eps);
}

double inv_sigma(const Graph& g, const engine::Node& n) { return mean_of_saved(g, n.saved[0]); }  // saved: 1/RMS

}  // namespace

extern const NormType kRmsNormType{
    .name = "rmsnorm",
    .paper = "Zhang & Sennrich 2019, Root Mean Square Layer Normalization",
    .equation = "y = γ ⊙ x/√(mean(x²) + ε)",
    .params = kParams,
    .op = engine::OpKind::rms_norm,
    .build = build,
    .inv_sigma = inv_sigma,
};

}  // namespace normlab::model
