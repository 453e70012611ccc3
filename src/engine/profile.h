#pragma once
// Where the graph's time goes: wall time and calls per op kind, forward and backward, summed over every
// pass made while a profile is attached (Graph::set_profile). A node costs two clock reads, never work
// per element, and a graph without a profile runs the plain loop.
#include <array>
#include <cstdint>

#include "engine/ops.h"

namespace normlab::engine {

struct OpProfile {
  static constexpr size_t kKinds = static_cast<size_t>(OpKind::count);
  std::array<double, kKinds> forward_s{}, backward_s{};
  std::array<int64_t, kKinds> forward_calls{}, backward_calls{};

  double total_s() const {
    double s = 0;
    for (size_t k = 0; k < kKinds; ++k) s += forward_s[k] + backward_s[k];
    return s;
  }
};

}  // namespace normlab::engine
