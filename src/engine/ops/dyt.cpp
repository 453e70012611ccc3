// DyT, "Transformers without Normalization" (Zhu et al. 2025): an elementwise stand-in for a norm,
//
//   y = γ ⊙ tanh(α x) + β            (α one learnable scalar; γ, β per channel; β optional)
//   ∂L/∂x = g ⊙ γ ⊙ α (1 − tanh²(αx)),   ∂L/∂α = Σ g ⊙ γ ⊙ x (1 − tanh²(αx)),
//   ∂L/∂γ = Σ_rows g ⊙ tanh(αx),          ∂L/∂β = Σ_rows g
//
// No statistics: the output is bounded by |γ| + |β| whatever the input's scale. tanh is the op's whole cost, so it is
// fast_math.h's (vectorized in fp32, libm's in fp64), and the forward pass keeps t = tanh(αx) in a saved activation
// that the backward pass reads instead of forming tanh twice more.
#include <algorithm>

#include "engine/fast_math.h"
#include "engine/ops.h"
#include "engine/parallel.h"

namespace normlab::engine {
namespace {

enum Slot { kX, kAlpha, kGain, kBias };
enum Saved { kTanh };

template <typename T>
void forward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.out).rows(), w = g.shape(n.out).last();
  const T alpha = *g.data<T>(n.in[kAlpha]);
  const T* x = g.data<T>(n.in[kX]);
  const T* gain = n.in[kGain] == kNoTensor ? nullptr : g.data<T>(n.in[kGain]);
  const T* bias = n.in[kBias] == kNoTensor ? nullptr : g.data<T>(n.in[kBias]);
  T* t = g.data<T>(n.saved[kTanh]);
  T* y = g.data<T>(n.out);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * w;
    T* tr = t + r * w;
    T* yr = y + r * w;
    for (int64_t j = 0; j < w; ++j) tr[j] = fast_tanh(alpha * xr[j]);
    for (int64_t j = 0; j < w; ++j) yr[j] = (gain ? gain[j] * tr[j] : tr[j]) + (bias ? bias[j] : T(0));
  }
}

template <typename T>
void backward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.out).rows(), w = g.shape(n.out).last();
  const T alpha = *g.data<T>(n.in[kAlpha]);
  const T* x = g.data<T>(n.in[kX]);
  const T* gain = n.in[kGain] == kNoTensor ? nullptr : g.data<T>(n.in[kGain]);
  const T* t = g.data<T>(n.saved[kTanh]);
  const T* dy = g.grad<T>(n.out);
  if (g.requires_grad(n.in[kX])) {
    T* dx = g.grad<T>(n.in[kX]);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < w; ++j) {
        const int64_t i = r * w + j;
        dx[i] += dy[i] * (gain ? gain[j] : T(1)) * alpha * (T(1) - t[i] * t[i]);
      }
  }
  // One pass accumulates [Σ g⊙γ⊙x(1−t²) | Σ g⊙t | Σ g] per column.
  T* sums = reinterpret_cast<T*>(g.workspace() + reduce_rows_workspace<T>(w, 3));
  std::fill(sums, sums + 3 * w, T(0));
  reduce_rows<T>(rows, w, 3, sums, g.workspace(), [&](int64_t r, T* acc) {
    for (int64_t j = 0; j < w; ++j) {
      const int64_t i = r * w + j;
      acc[j] += dy[i] * (gain ? gain[j] : T(1)) * x[i] * (T(1) - t[i] * t[i]);
      acc[w + j] += dy[i] * t[i];
      acc[2 * w + j] += dy[i];
    }
  });
  if (g.requires_grad(n.in[kAlpha])) {
    T total = 0;
    for (int64_t j = 0; j < w; ++j) total += sums[j];
    *g.grad<T>(n.in[kAlpha]) += total;
  }
  if (g.requires_grad(n.in[kGain]))
    for (int64_t j = 0; j < w; ++j) g.grad<T>(n.in[kGain])[j] += sums[w + j];
  if (g.requires_grad(n.in[kBias]))
    for (int64_t j = 0; j < w; ++j) g.grad<T>(n.in[kBias])[j] += sums[2 * w + j];
}

void forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { forward_kernel<T>(g, n); });
}
void backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { backward_kernel<T>(g, n); });
}

}  // namespace

extern const OpKernels dyt_kernels{forward, backward};

TensorId dyt(Graph& g, const std::string& name, TensorId x, TensorId alpha, TensorId gain, TensorId bias) {
  Node n = make_node(OpKind::dyt, x, alpha, gain);
  n.in[kBias] = bias;
  n.out = like(g, name, x, {x, alpha, gain, bias});
  n.saved[kTanh] = g.activation(name + ".tanh", g.shape(x), false);
  const int64_t w = g.shape(x).last();
  n.workspace_bytes = reduce_rows_workspace<double>(w, 3) + 3 * static_cast<size_t>(w) * sizeof(double);
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
