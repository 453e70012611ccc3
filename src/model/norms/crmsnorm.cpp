// CRMSNorm (Jiang et al. 2023, "Pre-RMSNorm and Pre-CRMSNorm Transformers"): RMSNorm of a zero-mean
// vector stored without its last coordinate (the stream of placement pre_crms). No parameters: the
// gains are folded into the next linear map by the conversion from Pre-LN.
#include "model/norm.h"

namespace normlab::model {
namespace {

TensorId build(Graph& g, const NormArgs& a) { return engine::crms_norm(g, a.name + ".out", a.x, a.eps); }

double inv_sigma(const Graph& g, const engine::Node& n) { return mean_of_saved(g, n.saved[0]); }  // saved: 1/RMS

}  // namespace

extern const NormType kCrmsNormType{
    .name = "crmsnorm",
    .paper = "Jiang et al. 2023, Pre-RMSNorm and Pre-CRMSNorm Transformers",
    .equation = "stream x = z₁..z_{d−1} of a zero-mean z (z_d = −Σx);  y = x/√((‖x‖² + (Σx)²)/d + ε)",
    .op = engine::OpKind::crms_norm,
    .build = build,
    .inv_sigma = inv_sigma,
};

}  // namespace normlab::model
