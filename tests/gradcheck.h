#pragma once
// Central finite differences in double precision against the analytic backward pass.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "engine/graph.h"
#include "model/init.h"

namespace normlab::testing {

// Fills every parameter of g with N(0, std) (gains near 1 where `gain_like` says so).
inline void randomize(engine::Graph& g, uint64_t seed, double std = 0.5) {
  for (engine::TensorId id : g.parameters()) {
    Rng rng(hash_string(g.spec(id).name, seed));
    const bool gain = g.spec(id).role == engine::Role::norm_gain;
    double* d = g.data<double>(id);
    for (int64_t i = 0; i < g.shape(id).numel(); ++i) d[i] = (gain ? 1.0 : 0.0) + std * rng.normal();
  }
}

inline double loss_of(engine::Graph& g, engine::TensorId loss) {
  g.forward(true);
  return *g.data<double>(loss);
}

// Relative error ‖analytic − numeric‖ / ‖numeric‖ of every parameter's gradient, checked ≤ tol.
// Parameters larger than max_entries are sampled on a fixed stride to keep the test fast.
inline void expect_gradients_match(engine::Graph& g, engine::TensorId loss, double tol = 1e-6,
                                   int64_t max_entries = 400, double h = 1e-5) {
  ASSERT_EQ(g.float_type(), engine::DType::f64);
  g.zero_param_grads();
  g.forward(true);
  g.backward(loss);
  for (engine::TensorId id : g.parameters()) {
    const auto& spec = g.spec(id);
    double* w = g.data<double>(id);
    const double* analytic = g.grad<double>(id);
    const int64_t n = spec.shape.numel(), stride = std::max<int64_t>(1, n / max_entries);
    double diff2 = 0, ref2 = 0;
    for (int64_t i = 0; i < n; i += stride) {
      const double saved = w[i];
      w[i] = saved + h;
      const double up = loss_of(g, loss);
      w[i] = saved - h;
      const double down = loss_of(g, loss);
      w[i] = saved;
      const double numeric = (up - down) / (2 * h);
      diff2 += (analytic[i] - numeric) * (analytic[i] - numeric);
      ref2 += numeric * numeric;
    }
    ASSERT_GT(ref2, 1e-20) << spec.name << ": its gradient is zero, so this check could not fail";
    EXPECT_LE(std::sqrt(diff2 / ref2), tol) << "gradient of " << spec.name;
  }
}

}  // namespace normlab::testing
