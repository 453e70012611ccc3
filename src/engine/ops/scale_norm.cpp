// ScaleNorm (Nguyen & Salazar 2019) and L2 normalization (QKNorm, Henry et al. 2020), per row:
//
//   n = max(‖x‖₂, ε),   y = g · x / n          (g one learnable scalar; absent = 1, plain L2 norm)
//
// Backward, where ‖x‖ > ε (u = ∂L/∂y):  ∂L/∂x = (g/n) · [u − x (xᵀu)/n²],   ∂L/∂g = Σ_rows uᵀx / n
// and where the clamp is active (n = ε, a constant):  ∂L/∂x = (g/ε) · u.
// Saved: n per row.
//
// crms_norm (Jiang et al. 2023): a zero-mean z ∈ R^d stored as its first d−1 coordinates x, the last
// being −Σx. RMSNorm of z, restricted to those coordinates, is
//
//   r = ((‖x‖² + (Σx)²)/d + ε)^(−1/2),   y = x · r
//   ∂L/∂x = r · [ u − (x̂ + ŝ·1) (uᵀx̂)/d ],   x̂ = x r, ŝ = (Σx) r      (non-affine)
//
// Fused with the residual add in front of it (add_crms_norm, engine/fusion.h), as LayerNorm and RMSNorm are.
//
// pb_relax (CogView's "precision bottleneck relaxation"): y = x · 8 / max|x|, the max taken over the
// whole tensor and detached, so ∂L/∂x = u · 8 / max|x|. A norm after it sees the same direction.
#include <algorithm>
#include <cmath>

#include "engine/fusion.h"
#include "engine/ops.h"
#include "engine/parallel.h"

namespace normlab::engine {
namespace {

template <typename T>
void scale_norm_forward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.out).rows(), w = g.shape(n.out).last();
  const T eps = static_cast<T>(n.attr.f[0]);
  const T gain = n.in[1] == kNoTensor ? T(1) : *g.data<T>(n.in[1]);
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  T* norm = g.data<T>(n.saved[0]);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    T sq = 0;
    for (int64_t j = 0; j < w; ++j) sq += x[r * w + j] * x[r * w + j];
    norm[r] = std::max(std::sqrt(sq), eps);
    for (int64_t j = 0; j < w; ++j) y[r * w + j] = gain * x[r * w + j] / norm[r];
  }
}

template <typename T>
void scale_norm_backward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.out).rows(), w = g.shape(n.out).last();
  const T eps = static_cast<T>(n.attr.f[0]);
  const T gain = n.in[1] == kNoTensor ? T(1) : *g.data<T>(n.in[1]);
  const T *x = g.data<T>(n.in[0]), *dy = g.grad<T>(n.out), *norm = g.data<T>(n.saved[0]);
  T* dx = g.requires_grad(n.in[0]) ? g.grad<T>(n.in[0]) : nullptr;
  T gain_grad = 0;
  for (int64_t r = 0; r < rows; ++r) {  // rows are few and short next to the GEMMs around this op
    T dot = 0;
    for (int64_t j = 0; j < w; ++j) dot += x[r * w + j] * dy[r * w + j];
    gain_grad += dot / norm[r];
    if (!dx) continue;
    const bool clamped = norm[r] <= eps;
    for (int64_t j = 0; j < w; ++j)
      dx[r * w + j] += gain / norm[r] * (dy[r * w + j] - (clamped ? T(0) : x[r * w + j] * dot / (norm[r] * norm[r])));
  }
  if (g.requires_grad(n.in[1])) *g.grad<T>(n.in[1]) += gain_grad;
}

// sum: the add node fused in front (its output is x), or nullptr.
template <typename T>
void crms_forward_kernel(Graph& g, const Node& n, const Node* sum_node) {
  const int64_t rows = g.shape(n.out).rows(), w = g.shape(n.out).last();
  const T eps = static_cast<T>(n.attr.f[0]), d = static_cast<T>(w + 1);
  const FusedSum<T> producer(g, sum_node);
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  T* rstd = g.data<T>(n.saved[0]);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    if (sum_node) producer.forward_row(r, w);
    T sq = 0, sum = 0;
    for (int64_t j = 0; j < w; ++j) sq += x[r * w + j] * x[r * w + j], sum += x[r * w + j];
    rstd[r] = T(1) / std::sqrt((sq + sum * sum) / d + eps);
    for (int64_t j = 0; j < w; ++j) y[r * w + j] = x[r * w + j] * rstd[r];
  }
}

template <typename T>
void crms_backward_kernel(Graph& g, const Node& n, const Node* sum_node) {
  const int64_t rows = g.shape(n.out).rows(), w = g.shape(n.out).last();
  const T d = static_cast<T>(w + 1);
  const FusedSum<T> producer(g, sum_node);
  const T *x = g.data<T>(n.in[0]), *dy = g.grad<T>(n.out), *rstd = g.data<T>(n.saved[0]);
  T* dx = g.grad<T>(n.in[0]);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T rs = rstd[r];
    T sum = 0, dot = 0;
    for (int64_t j = 0; j < w; ++j) sum += x[r * w + j], dot += dy[r * w + j] * x[r * w + j] * rs;
    for (int64_t j = 0; j < w; ++j) dx[r * w + j] += rs * (dy[r * w + j] - (x[r * w + j] * rs + sum * rs) * dot / d);
    if (sum_node) producer.backward_row(r, w);
  }
}

template <typename T>
void pb_relax_forward_kernel(Graph& g, const Node& n) {
  const int64_t count = g.shape(n.out).numel();
  const T* x = g.data<T>(n.in[0]);
  T max = 0;
  for (int64_t i = 0; i < count; ++i) max = std::max(max, std::abs(x[i]));
  const T factor = max > 0 ? T(8) / max : T(1);
  *g.data<T>(n.saved[0]) = factor;
  T* y = g.data<T>(n.out);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] * factor;
}

template <typename T>
void pb_relax_backward_kernel(Graph& g, const Node& n) {
  const int64_t count = g.shape(n.out).numel();
  const T factor = *g.data<T>(n.saved[0]);
  const T* dy = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) dx[i] += dy[i] * factor;
}

NORMLAB_FLOAT_OP(scale_norm)
NORMLAB_FLOAT_OP(pb_relax)

NORMLAB_FUSABLE_NORM_OP(crms)

TensorId with_row_statistic(Graph& g, Node n, const std::string& name, TensorId x, Shape saved) {
  n.out = like(g, name, x, {x, n.in[1]});
  n.saved[0] = g.activation(name + ".stat", saved, false);
  g.record(n);
  return n.out;
}

}  // namespace

extern const OpKernels scale_norm_kernels{scale_norm_forward, scale_norm_backward};
extern const OpKernels crms_norm_kernels{crms_forward, crms_backward};
extern const OpKernels add_crms_norm_kernels{crms_fused_forward, crms_fused_backward};
extern const OpKernels pb_relax_kernels{pb_relax_forward, pb_relax_backward};

TensorId scale_norm(Graph& g, const std::string& name, TensorId x, TensorId gain, double eps) {
  Node n = make_node(OpKind::scale_norm, x, gain);
  n.attr.f[0] = eps;
  return with_row_statistic(g, n, name, x, Shape{g.shape(x).rows()});
}

TensorId crms_norm(Graph& g, const std::string& name, TensorId x, double eps) {
  Node n = make_node(OpKind::crms_norm, x);
  n.attr.f[0] = eps;
  return with_row_statistic(g, n, name, x, Shape{g.shape(x).rows()});
}

TensorId pb_relax(Graph& g, const std::string& name, TensorId x) {
  return with_row_statistic(g, make_node(OpKind::pb_relax, x), name, x, Shape{1});
}

}  // namespace normlab::engine
