#pragma once
// The whole-model gradient check: a tiny model in double precision on a fixed batch, its parameters initialized by
// the placement's rule and then moved by noise so that no value is special (ReZero's α = 0, gains of 1), and the
// analytic gradient of every parameter compared with central differences of the loss. `normlab variants check` runs
// it on a formula; tests/model/variant_gradcheck_test.cpp on every placement and switch.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace normlab::model {

// The tiny model's model section (vocabulary 13, d 8, 2 heads, 2 layers, d_ff 12, 5 positions), to which a caller
// adds the placement and any other field.
Json gradient_check_section();
// Built in fp64 with a fixed batch of 2 × 5 tokens (a masked-LM's targets on an encoder, a padded source on an
// encoder-decoder), initialized with `seed` and every parameter then moved by N(0, 0.3²) drawn from `noise_seed`.
std::unique_ptr<Model> gradient_check_model(const ModelConfig& config, uint64_t seed = 7, uint64_t noise_seed = 11);

// One parameter's gradient, analytic and by central differences, over the entries sampled (every entry, or a fixed
// stride through a large parameter).
struct GradientComparison {
  std::string name;
  double analytic_norm = 0, numeric_norm = 0, difference_norm = 0;  // ‖·‖₂ over the sampled entries
  int64_t sampled = 0;
  double relative() const { return difference_norm / numeric_norm; }
  // ‖analytic − numeric‖ ≤ tolerance·‖numeric‖ + 1e-9·√sampled: central differences with h = 1e-5 on a loss of ~3
  // carry ~3e-11 of round-off per entry, so a gradient that is itself that small is compared within the round-off.
  bool agrees(double tolerance = 1e-6) const;
  // Both below 1e-9: nothing reaches the parameter (a key bias, which softmax ignores), so agreement says nothing.
  bool zero() const { return numeric_norm < 1e-9 && analytic_norm < 1e-9; }
};
// Every parameter `select` keeps (all by default), at most `max_entries` entries of each, after one forward and
// backward pass at the current values; the graph is left holding the unperturbed forward pass.
std::vector<GradientComparison> compare_gradients(Model& m, const std::function<bool(const std::string&)>& select = {},
                                                  int64_t max_entries = 300, double h = 1e-5);

// One OpenMP thread while finite differences replay a tiny graph thousands of times: on 2 cores a team of 2 spends
// ~1 ms per forward synchronizing (20× slower than 1 thread), and results do not depend on it. The previous setting
// is restored.
class OneThread {
 public:
  OneThread();
  ~OneThread();
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_;
};

}  // namespace normlab::model
