#pragma once
// Deterministic random streams, independent of the C++ library, so a run draws the same numbers on
// every machine: initialization, batches, dropout masks and sampling all derive from them.
#include <cstdint>
#include <string>

namespace normlab {

// N(0, 1) and U(0, 1) draws from splitmix64 (Box-Muller for the normal).
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

// FNV-1a of s, mixed with seed: a per-name stream seed (each parameter draws from its own stream).
uint64_t hash_string(const std::string& s, uint64_t seed);

}  // namespace normlab
