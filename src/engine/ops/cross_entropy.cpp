// Softmax cross-entropy averaged over the rows of logits [R, V] that have a target: integer targets [R], where a
// negative target marks a row without one (a token a masked LM does not predict). With C the rows that count:
//
//   ℓ = (1/|C|) Σ_{r∈C} [ lse(z_r) − z_r[t_r] ],   lse(z) = log Σ_j exp(z_j)
//   ∂ℓ/∂z_r[j] = (softmax(z_r)[j] − [j = t_r]) / |C|  for r ∈ C,  0 for the other rows
//
// With label smoothing ε the target of row r is the distribution q_r = (1 − ε)·[j = t_r] + ε/V, so
//
//   ℓ_r = −Σ_j q_r[j] log softmax(z_r)[j] = lse(z_r) − (1 − ε)·z_r[t_r] − ε·mean_j z_r[j]
//   ∂ℓ_r/∂z_r[j] = softmax(z_r)[j] − q_r[j]
//
// No row counting: ℓ = 0 and no gradient. Saved: lse per row and |C|. The mean is summed in row order, so it is
// bit-identical for any thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/fast_math.h"
#include "engine/ops.h"

namespace normlab::engine {
namespace {

template <typename T>
void forward_kernel(Graph& g, const Node& n) {
  const Shape& s = g.shape(n.in[0]);
  const int64_t rows = s.rows(), vocab = s.last();
  const T* z = g.data<T>(n.in[0]);
  const int32_t* target = g.data<int32_t>(n.in[1]);
  T* lse = g.data<T>(n.saved[0]);
  T* row_loss = reinterpret_cast<T*>(g.workspace());
  const T eps = static_cast<T>(n.attr.f[0]);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    if (target[r] < 0) {
      row_loss[r] = 0;
      continue;
    }
    const T* zr = z + r * vocab;
    T max = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : max)
    for (int64_t j = 0; j < vocab; ++j) max = std::max(max, zr[j]);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < vocab; ++j) sum += fast_exp(zr[j] - max);
    lse[r] = max + std::log(sum);
    row_loss[r] = lse[r] - zr[target[r]];
    if (eps > 0) {
      T mean = 0;
#pragma omp simd reduction(+ : mean)
      for (int64_t j = 0; j < vocab; ++j) mean += zr[j];
      mean /= static_cast<T>(vocab);
      row_loss[r] = lse[r] - (T(1) - eps) * zr[target[r]] - eps * mean;
    }
  }
  T total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) total += row_loss[r], counted += target[r] >= 0;
  *g.data<T>(n.saved[1]) = static_cast<T>(counted);
  *g.data<T>(n.out) = counted ? total / static_cast<T>(counted) : T(0);
}

template <typename T>
void backward_kernel(Graph& g, const Node& n) {
  const Shape& s = g.shape(n.in[0]);
  const int64_t rows = s.rows(), vocab = s.last();
  const T* z = g.data<T>(n.in[0]);
  const int32_t* target = g.data<int32_t>(n.in[1]);
  const T* lse = g.data<T>(n.saved[0]);
  const T counted = *g.data<T>(n.saved[1]);
  if (counted == 0) return;
  const T scale = *g.grad<T>(n.out) / counted;
  const T eps = static_cast<T>(n.attr.f[0]), uniform = eps / static_cast<T>(vocab);
  T* dz = g.grad<T>(n.in[0]);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    if (target[r] < 0) continue;
    const T* zr = z + r * vocab;
    T* dr = dz + r * vocab;
    const T lse_r = lse[r];
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) dr[j] += scale * (fast_exp(zr[j] - lse_r) - uniform);
    dr[target[r]] -= scale * (T(1) - eps);
  }
}

void forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { forward_kernel<T>(g, n); });
}
void backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { backward_kernel<T>(g, n); });
}

}  // namespace

extern const OpKernels cross_entropy_kernels{forward, backward};

TensorId cross_entropy(Graph& g, const std::string& name, TensorId logits, TensorId targets, double smoothing) {
  const int64_t rows = g.shape(logits).rows();
  if (g.shape(targets).numel() != rows)
    fail("internal: cross_entropy has {} logit rows but {} targets", rows, g.shape(targets).numel());
  if (!(smoothing >= 0 && smoothing < 1)) fail("internal: label smoothing {} is outside [0, 1)", smoothing);
  Node n = make_node(OpKind::cross_entropy, logits, targets);
  n.attr.f[0] = smoothing;
  n.out = g.activation(name, Shape{}, g.requires_grad(logits));
  n.saved = {g.activation(name + ".lse", Shape{rows}, false), g.activation(name + ".counted", Shape{1}, false)};
  n.workspace_bytes = static_cast<size_t>(rows) * dtype_size(g.float_type());
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
