#pragma once
// Small reductions the probes share: over a tensor of any float dtype, accumulated in fp64.
#include <cmath>

#include "engine/graph.h"

namespace normlab::probe {

struct TensorStats {
  double mean_square = 0, max_abs = 0;
  bool finite = true;
  double rms() const { return std::sqrt(mean_square); }
};

// Statistics of a tensor's values (grad = false) or of its gradient (grad = true).
TensorStats tensor_stats(const engine::Graph& g, engine::TensorId id, bool grad = false);

}  // namespace normlab::probe
