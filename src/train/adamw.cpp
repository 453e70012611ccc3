#include "train/adamw.h"

#include <algorithm>
#include <cmath>

namespace normlab::train {

namespace eng = normlab::engine;

AdamW::AdamW(eng::Graph& g) : g_(g) {
  eng::dispatch_float(g.float_type(), [&]<typename T>() {
    for (eng::TensorId id : g.parameters()) {
      moments<T>().m.emplace_back(static_cast<size_t>(g.shape(id).numel()), T(0));
      moments<T>().v.emplace_back(static_cast<size_t>(g.shape(id).numel()), T(0));
    }
  });
}

template <typename T>
void AdamW::step_kernel(const AdamWSettings& s, double grad_scale, int t) {
  const T beta1 = static_cast<T>(s.beta1), beta2 = static_cast<T>(s.beta2), eps = static_cast<T>(s.eps);
  const T c = static_cast<T>(grad_scale);
  // lr·m̂/(√v̂ + ε) = (lr/(1−β1ᵗ)) · m / (√v · (1−β2ᵗ)^(−1/2) + ε): the corrections become two constants.
  const T step_size = static_cast<T>(s.lr / (1 - std::pow(s.beta1, t)));
  const T inv_sqrt_correction2 = static_cast<T>(1 / std::sqrt(1 - std::pow(s.beta2, t)));
  const auto& params = g_.parameters();
  Moments<T>& state = moments<T>();
#pragma omp parallel
  for (size_t p = 0; p < params.size(); ++p) {
    const eng::TensorSpec& spec = g_.spec(params[p]);
    const T keep = static_cast<T>(spec.weight_decay ? 1 - s.lr * s.weight_decay : 1.0);
    const int64_t n = spec.shape.numel();
    T* w = g_.data<T>(params[p]);
    const T* grad = g_.grad<T>(params[p]);
    T* m = state.m[p].data();
    T* v = state.v[p].data();
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) {
      const T gi = c * grad[i];
      m[i] = beta1 * m[i] + (1 - beta1) * gi;
      v[i] = beta2 * v[i] + (1 - beta2) * gi * gi;
      w[i] = keep * w[i] - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_correction2 + eps);
    }
  }
}

void AdamW::step(const AdamWSettings& s, double grad_scale, int t) {
  eng::dispatch_float(g_.float_type(), [&]<typename T>() { step_kernel<T>(s, grad_scale, t); });
}

double global_grad_norm(const eng::Graph& g) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  struct Chunk {
    eng::TensorId id;
    int64_t begin, end;
    double sum;
  };
  // Every parameter cut into fixed chunks, listed in order; the buffer keeps its capacity between steps.
  // (A thread_local, named through a reference: inside the parallel loop the name alone would be each worker's own.)
  static thread_local std::vector<Chunk> buffer;
  std::vector<Chunk>& chunks = buffer;
  chunks.clear();
  for (eng::TensorId id : g.parameters())
    for (int64_t b = 0, n = g.shape(id).numel(); b < n; b += kChunk)
      chunks.push_back({id, b, std::min(n, b + kChunk), 0.0});
  eng::dispatch_float(g.float_type(), [&]<typename T>() {
#pragma omp parallel for schedule(dynamic, 4)
    for (size_t c = 0; c < chunks.size(); ++c) {
      const T* grad = g.grad<T>(chunks[c].id);
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = chunks[c].begin; i < chunks[c].end; ++i) s += static_cast<double>(grad[i]) * grad[i];
      chunks[c].sum = s;
    }
  });
  double total = 0;
  for (const Chunk& c : chunks) total += c.sum;
  return std::sqrt(total);
}

}  // namespace normlab::train
