#pragma once
// Weights for identity tests: a placement's own initialization, then every parameter moved by N(0, 0.2), so that
// gains, biases and means are generic (a centered or unit-gain model would make some identities hold trivially).
#include <cstdint>
#include <vector>

#include "common/rng.h"
#include "engine/graph.h"
#include "model/init.h"
#include "model/transformer.h"

namespace normlab::model {

inline void set_values(engine::Graph& g, engine::TensorId id, const std::vector<double>& v) {
  engine::dispatch_float(g.float_type(), [&]<typename T>() {
    T* d = g.data<T>(id);
    for (size_t i = 0; i < v.size(); ++i) d[i] = static_cast<T>(v[i]);
  });
}

inline void init_generic(Model& m, uint64_t seed) {
  initialize(m, seed);
  for (engine::TensorId id : m.graph.parameters()) {
    Rng rng(hash_string(m.graph.spec(id).name, seed + 1));
    auto v = engine::to_f64(m.graph, id);
    for (double& x : v) x += 0.2 * rng.normal();
    set_values(m.graph, id, v);
  }
}

}  // namespace normlab::model
