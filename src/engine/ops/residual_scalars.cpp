// Learnable scalars on the residual path: the shortcut and branch gains of ReZero, Admin, NormFormer,
// DLCL and head scaling, and GPAS's stop-gradient gate.
//
// scale_add: y = a + s ⊙ b, with s = p[index] (scalar), p (a [w] vector) or p[j / (w/H)] (per head)
//   ∂L/∂a = g,   ∂L/∂b = s ⊙ g,   ∂L/∂s = Σ_rows g ⊙ b   (summed over each head's columns in heads mode)
//
// gpas (Chen et al. 2025): y = x − SiLU(a)·sg(x), so the forward value is (1 − SiLU(a))·x but
//   ∂L/∂x = g                      (the gradient is NOT scaled: that is the point of the method)
//   ∂L/∂a = −SiLU'(a) · Σ g ⊙ x,   SiLU'(a) = σ(a)(1 + a(1 − σ(a)))
#include <cmath>

#include "engine/ops.h"
#include "engine/parallel.h"

namespace normlab::engine {
namespace {

enum Slot { kA, kB, kP };

struct ScaleLayout {
  ScaleMode mode;
  int64_t index, width, head_width;
  int64_t column(int64_t j) const {
    return mode == ScaleMode::scalar ? index : mode == ScaleMode::vector ? j : j / head_width;
  }
};
ScaleLayout layout_of(const Graph& g, const Node& n) {
  const auto mode = static_cast<ScaleMode>(n.attr.i[0]);
  const int64_t width = g.shape(n.out).last();
  const int64_t heads = mode == ScaleMode::heads ? g.shape(n.in[kP]).numel() : 1;
  return {mode, n.attr.i[1], width, width / heads};
}

template <typename T>
void scale_add_forward_kernel(Graph& g, const Node& n) {
  const ScaleLayout L = layout_of(g, n);
  const int64_t rows = g.shape(n.out).rows();
  const T* a = n.in[kA] == kNoTensor ? nullptr : g.data<T>(n.in[kA]);
  const T *b = g.data<T>(n.in[kB]), *p = g.data<T>(n.in[kP]);
  T* y = g.data<T>(n.out);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < L.width; ++j) {
      const int64_t i = r * L.width + j;
      y[i] = (a ? a[i] : T(0)) + p[L.column(j)] * b[i];
    }
}

template <typename T>
void scale_add_backward_kernel(Graph& g, const Node& n) {
  const ScaleLayout L = layout_of(g, n);
  const int64_t rows = g.shape(n.out).rows(), count = rows * L.width;
  const T *b = g.data<T>(n.in[kB]), *p = g.data<T>(n.in[kP]), *dy = g.grad<T>(n.out);
  if (g.requires_grad(n.in[kA])) {
    T* da = g.grad<T>(n.in[kA]);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) da[i] += dy[i];
  }
  if (g.requires_grad(n.in[kB])) {
    T* db = g.grad<T>(n.in[kB]);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) db[i] += p[L.column(i % L.width)] * dy[i];
  }
  if (!g.requires_grad(n.in[kP])) return;
  // Reduce Σ_rows g ⊙ b per column, then fold the columns onto the entries of p they share.
  T* columns = reinterpret_cast<T*>(g.workspace() + reduce_rows_workspace<T>(L.width, 1));
  std::fill(columns, columns + L.width, T(0));
  reduce_rows<T>(rows, L.width, 1, columns, g.workspace(), [&](int64_t r, T* acc) {
    for (int64_t j = 0; j < L.width; ++j) acc[j] += dy[r * L.width + j] * b[r * L.width + j];
  });
  T* dp = g.grad<T>(n.in[kP]);
  for (int64_t j = 0; j < L.width; ++j) dp[L.column(j)] += columns[j];
}

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <typename T>
void gpas_forward_kernel(Graph& g, const Node& n) {
  const T a = *g.data<T>(n.in[1]);
  const T keep = T(1) - a * sigmoid(a);
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  const int64_t count = g.shape(n.out).numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) y[i] = keep * x[i];
}

template <typename T>
void gpas_backward_kernel(Graph& g, const Node& n) {
  const int64_t count = g.shape(n.out).numel(), width = g.shape(n.out).last();
  const T *x = g.data<T>(n.in[0]), *dy = g.grad<T>(n.out);
  if (g.requires_grad(n.in[0])) {
    T* dx = g.grad<T>(n.in[0]);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) dx[i] += dy[i];
  }
  if (!g.requires_grad(n.in[1])) return;
  T* columns = reinterpret_cast<T*>(g.workspace() + reduce_rows_workspace<T>(width, 1));
  std::fill(columns, columns + width, T(0));
  reduce_rows<T>(count / width, width, 1, columns, g.workspace(), [&](int64_t r, T* acc) {
    for (int64_t j = 0; j < width; ++j) acc[j] += dy[r * width + j] * x[r * width + j];
  });
  T dot = 0;
  for (int64_t j = 0; j < width; ++j) dot += columns[j];
  const T a = *g.data<T>(n.in[1]), s = sigmoid(a);
  *g.grad<T>(n.in[1]) -= s * (T(1) + a * (T(1) - s)) * dot;
}

void scale_add_forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { scale_add_forward_kernel<T>(g, n); });
}
void scale_add_backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { scale_add_backward_kernel<T>(g, n); });
}
void gpas_forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { gpas_forward_kernel<T>(g, n); });
}
void gpas_backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { gpas_backward_kernel<T>(g, n); });
}

size_t column_reduce_workspace(int64_t width) {
  return reduce_rows_workspace<double>(width, 1) + static_cast<size_t>(width) * sizeof(double);
}

}  // namespace

extern const OpKernels scale_add_kernels{scale_add_forward, scale_add_backward};
extern const OpKernels gpas_kernels{gpas_forward, gpas_backward};

TensorId scale_add(Graph& g, const std::string& name, TensorId a, TensorId b, TensorId p, ScaleMode mode,
                   int64_t index) {
  const int64_t width = g.shape(b).last(), size = g.shape(p).numel();
  if (a != kNoTensor && g.shape(a) != g.shape(b))
    fail("internal: scale_add of {} and {}", g.shape(a).str(), g.shape(b).str());
  if ((mode == ScaleMode::scalar && (index < 0 || index >= size)) || (mode == ScaleMode::vector && size != width) ||
      (mode == ScaleMode::heads && width % size != 0))
    fail("internal: scale_add '{}': parameter {} does not fit width {}", name, g.shape(p).str(), width);
  Node n = make_node(OpKind::scale_add, a, b, p);
  n.out = like(g, name, b, {a, b, p});
  n.attr.i = {static_cast<int64_t>(mode), index, 0, 0};
  n.workspace_bytes = column_reduce_workspace(width);
  g.record(n);
  return n.out;
}

TensorId gpas(Graph& g, const std::string& name, TensorId x, TensorId gate) {
  Node n = make_node(OpKind::gpas, x, gate);
  n.out = like(g, name, x, {x, gate});
  n.workspace_bytes = column_reduce_workspace(g.shape(x).last());
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
