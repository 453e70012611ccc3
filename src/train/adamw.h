#pragma once
// AdamW (Loshchilov & Hutter 2019) over a graph's parameters. Moment buffers are allocated once.
//
//   g ← c·∇ (c = clip factor)        m ← β1 m + (1−β1) g        v ← β2 v + (1−β2) g²
//   θ ← θ − lr·λ·θ  (decay flagged params only)  then  θ ← θ − lr · m̂ / (√v̂ + ε),
//   m̂ = m/(1−β1ᵗ), v̂ = v/(1−β2ᵗ)
//
// Gradients are read, never written: clipping enters as the factor c, so a probe that reads the
// gradients after the step sees exactly what backward produced. The moments and the update's arithmetic are in
// the graph's float type (fp32 state in fp32 runs, as PyTorch keeps it; fp64 in the fp64 checks), and a step is
// one pass over every parameter inside one parallel region.
#include <type_traits>
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
  // Moment buffers, one per parameter in graph.parameters() order; T is the graph's float type.
  template <typename T>
  std::vector<T>& first_moment(size_t i) {
    return moments<T>().m.at(i);
  }
  template <typename T>
  std::vector<T>& second_moment(size_t i) {
    return moments<T>().v.at(i);
  }

 private:
  template <typename T>
  struct Moments {
    std::vector<std::vector<T>> m, v;
  };
  template <typename T>
  Moments<T>& moments() {
    if constexpr (std::is_same_v<T, float>) return f32_;
    else return f64_;
  }
  template <typename T>
  void step_kernel(const AdamWSettings& s, double grad_scale, int t);

  engine::Graph& g_;
  Moments<float> f32_;   // used when the graph is fp32
  Moments<double> f64_;  // used when the graph is fp64
};

// ‖∇‖₂ over all parameters, accumulated in fp64 over fixed chunks added in order, so it is the same for every
// thread count.
double global_grad_norm(const engine::Graph& g);

}  // namespace normlab::train
