#pragma once
// AdamW (Loshchilov & Hutter 2019) over a graph's parameters. Moment buffers are allocated once.
//
//   g ← c·∇ (c = clip factor)        m ← β1 m + (1−β1) g        v ← β2 v + (1−β2) g²
//   θ ← θ − lr·λ·θ  (decay flagged params only)  then  θ ← θ − lr · m̂ / (√v̂ + ε),
//   m̂ = m/(1−β1ᵗ), v̂ = v/(1−β2ᵗ)
//
// Gradients are read, never written: clipping enters as the factor c, so a probe that reads the
// gradients after the step sees exactly what backward produced.
#include <vector>

#include "engine/graph.h"

namespace normlab::train {

struct AdamWSettings {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

class AdamW {
 public:
  explicit AdamW(engine::Graph& g);
  // One update with gradients multiplied by grad_scale. t (the bias-correction step) is the number
  // of updates so far, including this one.
  void step(const AdamWSettings& s, double grad_scale, int t);
  // Moment buffers, one per parameter in graph.parameters() order, in the graph's dtype.
  std::vector<double>& first_moment(size_t i) { return m_[i]; }
  std::vector<double>& second_moment(size_t i) { return v_[i]; }

 private:
  engine::Graph& g_;
  std::vector<std::vector<double>> m_, v_;  // kept in fp64: tiny next to activations, exact on resume
};

// ‖∇‖₂ over all parameters, accumulated in fp64.
double global_grad_norm(const engine::Graph& g);

}  // namespace normlab::train
