// The map of the engine: one row per op, in OpKind order.
#include <array>

#include "engine/ops.h"

namespace normlab::engine {

extern const OpDef kEmbeddingOp, kPositionAddOp, kLinearOp, kLayerNormOp, kRmsNormOp, kAddOp, kScaleOp,
    kGeluOp, kGatedOp, kRopeOp, kAttentionOp, kCrossEntropyOp, kDropoutOp, kScaleAddOp, kGpasOp, kDytOp, kScaleNormOp,
    kCrmsNormOp, kCenterOp, kSoftcapOp, kPbRelaxOp;

const OpDef& op_def(OpKind kind) {
  static const std::array<const OpDef*, static_cast<size_t>(OpKind::count)> table = {
      &kEmbeddingOp, &kPositionAddOp, &kLinearOp, &kLayerNormOp, &kRmsNormOp, &kAddOp,  &kScaleOp,
      &kGeluOp,      &kGatedOp,       &kRopeOp,   &kAttentionOp, &kCrossEntropyOp, &kDropoutOp,
      &kScaleAddOp,  &kGpasOp,        &kDytOp,    &kScaleNormOp, &kCrmsNormOp,  &kCenterOp, &kSoftcapOp, &kPbRelaxOp,
  };
  return *table[static_cast<size_t>(kind)];
}

TensorId like(Graph& g, const std::string& name, TensorId x, std::initializer_list<TensorId> inputs) {
  bool needs_grad = false;
  for (TensorId t : inputs) needs_grad = needs_grad || g.requires_grad(t);
  return g.activation(name, g.shape(x), needs_grad);
}

}  // namespace normlab::engine
