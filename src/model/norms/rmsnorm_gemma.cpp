// Gemma's RMSNorm (Gemma Team 2024): the gain is stored as an offset from 1, so weight decay pulls
// the norm toward the identity scale rather than toward 0.
#include "model/norm.h"

namespace normlab::model {
namespace {

constexpr NormParam kParams[] = {{"weight", "w = 0 (the gain is 1 + w)"}};

TensorId build(Graph& g, const NormArgs& a) {
  return engine::rms_norm(g, a.name + ".out", a.x, norm_gain(g, a, 0.0), a.eps, 1.0);
}

// The same op as rmsnorm: its saved statistic is 1/RMS.
double inv_sigma(const Graph& g, const engine::Node& n) { return mean_of_saved(g, n.saved[0]); }

}  // namespace

extern const NormType kRmsNormGemmaType{
    .name = "rmsnorm_gemma",
    .paper = "Gemma Team 2024, Gemma: Open Models Based on Gemini Research and Technology (code)",
    .equation = "y = (1 + w) ⊙ x/√(mean(x²) + ε)",
    .params = kParams,
    .op = engine::OpKind::rms_norm,
    .build = build,
    .inv_sigma = inv_sigma,
};

}  // namespace normlab::model
