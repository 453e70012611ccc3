#pragma once
// Initialization is its own pass over the named parameters, keyed on each one's role (q, k, v, o,
// fc1, gate, fc2, embedding, head, norm gain, bias), so that depth-aware rules apply to exactly the
// matrices their papers name. Each parameter draws from its own random stream, derived from the
// seed and its name, so adding a parameter never changes another's values.
#include <cstdint>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace normlab::model {

// Fills every parameter of m by m.config.init.
void initialize(Model& m, uint64_t seed);

// The realized statistics of one parameter after initialization (for `normlab init-report`).
struct ParamStats {
  std::string name;
  std::string role;
  std::string shape;
  double mean, std, rms;
};
std::vector<ParamStats> parameter_stats(const Model& m);

// Deterministic N(0, 1) and U(0, 1) streams (splitmix64 + Box-Muller), independent of the C++ library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1)
  double normal();
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};
uint64_t hash_string(const std::string& s, uint64_t seed);

}  // namespace normlab::model
