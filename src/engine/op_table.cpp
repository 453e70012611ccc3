// The map of the engine: one row per op of NORMLAB_OPS, in OpKind order.
#include <array>

#include "engine/ops.h"

namespace normlab::engine {

#define NORMLAB_OP_KERNELS(name) extern const OpKernels name##_kernels;
NORMLAB_OPS(NORMLAB_OP_KERNELS)
#undef NORMLAB_OP_KERNELS

const OpDef& op_def(OpKind kind) {
  static const std::array<OpDef, static_cast<size_t>(OpKind::count)> table = {{
#define NORMLAB_OP_ROW(name) {OpKind::name, #name, name##_kernels},
      NORMLAB_OPS(NORMLAB_OP_ROW)
#undef NORMLAB_OP_ROW
  }};
  return table[static_cast<size_t>(kind)];
}

TensorId like(Graph& g, const std::string& name, TensorId x, std::initializer_list<TensorId> inputs) {
  bool needs_grad = false;
  for (TensorId t : inputs) needs_grad = needs_grad || g.requires_grad(t);
  return g.activation(name, g.shape(x), needs_grad);
}

}  // namespace normlab::engine
