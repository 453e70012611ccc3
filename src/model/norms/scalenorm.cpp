// ScaleNorm (Nguyen & Salazar 2019, "Transformers without Tears"): one learnable length g for the
// whole vector, projected onto the sphere of radius g.
#include <cmath>

#include "model/norm.h"

namespace normlab::model {
namespace {

constexpr NormParam kParams[] = {{"weight", "g = √d (a scalar)"}};

TensorId build(Graph& g, const NormArgs& a) {
  const double width = static_cast<double>(g.shape(a.x).last());
  TensorId gs = g.parameter(a.name + ".weight", engine::Shape{1}, engine::Role::scalar, false, std::sqrt(width));
  return engine::scale_norm(g, a.name + ".out", a.x, gs, a.eps);
}

// y = g·x/‖x‖ = (g/√d)·x/rms(x): the Jacobian scale is g/‖x‖ (saved: ‖x‖ per row).
double inv_sigma(const Graph& g, const engine::Node& n) {
  double gain = 1;
  if (n.in[1] != engine::kNoTensor)
    engine::dispatch_float(g.float_type(), [&]<typename T>() { gain = *g.data<T>(n.in[1]); });
  return gain * mean_of_saved(g, n.saved[0], true);
}

}  // namespace

extern const NormType kScaleNormType{
    .name = "scalenorm",
    .paper = "Nguyen & Salazar 2019, Transformers without Tears",
    .equation = "y = g · x/max(‖x‖₂, ε)",
    .params = kParams,
    .op = engine::OpKind::scale_norm,
    .build = build,
    .inv_sigma = inv_sigma,
};

}  // namespace normlab::model
