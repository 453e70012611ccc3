// Elementwise ops, each with its derivative:
//
//   add:     y = α·a + β·b             ∂L/∂a = α·g,  ∂L/∂b = β·g
//   scale:   y = c·x                   ∂L/∂x = c·g
//   gelu:    y = x·Φ(x)                ∂y/∂x = Φ(x) + x·φ(x)        (exact erf form, as torch's default)
//   swiglu:  y = SiLU(a) ⊙ u           ∂L/∂a = g ⊙ u ⊙ σ(a)(1 + a(1 − σ(a))),  ∂L/∂u = g ⊙ SiLU(a)
//   dropout: y = x ⊙ m / (1 − p)       ∂L/∂x = g ⊙ m / (1 − p); m is recomputed from a counter-based
//            hash of (seed, step, node, element), so nothing is stored and resume replays the same masks.
#include <cmath>
#include <numbers>

#include "engine/ops.h"

namespace normlab::engine {
namespace {

template <typename T, typename Fn>
void for_each(int64_t count, Fn fn) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) fn(i);
}

int64_t numel(const Graph& g, const Node& n) { return g.shape(n.out).numel(); }

template <typename T>
void add_forward_kernel(Graph& g, const Node& n) {
  const T alpha = static_cast<T>(n.attr.f[0]), beta = static_cast<T>(n.attr.f[1]);
  const T *a = g.data<T>(n.in[0]), *b = g.data<T>(n.in[1]);
  T* y = g.data<T>(n.out);
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = alpha * a[i] + beta * b[i]; });
}
template <typename T>
void add_backward_kernel(Graph& g, const Node& n) {
  const T* dy = g.grad<T>(n.out);
  for (int s = 0; s < 2; ++s) {
    if (!g.requires_grad(n.in[s])) continue;
    const T c = static_cast<T>(n.attr.f[static_cast<size_t>(s)]);
    T* dx = g.grad<T>(n.in[s]);
    for_each<T>(numel(g, n), [&](int64_t i) { dx[i] += c * dy[i]; });
  }
}

template <typename T>
void scale_forward_kernel(Graph& g, const Node& n) {
  const T c = static_cast<T>(n.attr.f[0]);
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = c * x[i]; });
}
template <typename T>
void scale_backward_kernel(Graph& g, const Node& n) {
  const T c = static_cast<T>(n.attr.f[0]);
  const T* dy = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
  for_each<T>(numel(g, n), [&](int64_t i) { dx[i] += c * dy[i]; });
}

template <typename T>
T normal_cdf(T x) { return T(0.5) * (T(1) + std::erf(x * static_cast<T>(std::numbers::sqrt2 / 2))); }
template <typename T>
T normal_pdf(T x) { return std::exp(T(-0.5) * x * x) * static_cast<T>(std::numbers::inv_sqrtpi / std::numbers::sqrt2); }

template <typename T>
void gelu_forward_kernel(Graph& g, const Node& n) {
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = x[i] * normal_cdf(x[i]); });
}
template <typename T>
void gelu_backward_kernel(Graph& g, const Node& n) {
  const T *x = g.data<T>(n.in[0]), *dy = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
  for_each<T>(numel(g, n), [&](int64_t i) { dx[i] += dy[i] * (normal_cdf(x[i]) + x[i] * normal_pdf(x[i])); });
}

template <typename T>
T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

template <typename T>
void swiglu_forward_kernel(Graph& g, const Node& n) {
  const T *a = g.data<T>(n.in[0]), *u = g.data<T>(n.in[1]);
  T* y = g.data<T>(n.out);
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = a[i] * sigmoid(a[i]) * u[i]; });
}
template <typename T>
void swiglu_backward_kernel(Graph& g, const Node& n) {
  const T *a = g.data<T>(n.in[0]), *u = g.data<T>(n.in[1]), *dy = g.grad<T>(n.out);
  T* da = g.requires_grad(n.in[0]) ? g.grad<T>(n.in[0]) : nullptr;
  T* du = g.requires_grad(n.in[1]) ? g.grad<T>(n.in[1]) : nullptr;
  for_each<T>(numel(g, n), [&](int64_t i) {
    const T s = sigmoid(a[i]);
    if (da) da[i] += dy[i] * u[i] * s * (T(1) + a[i] * (T(1) - s));
    if (du) du[i] += dy[i] * a[i] * s;
  });
}

// splitmix64 finalizer: a statistically good 64-bit hash, cheap enough per element.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
inline bool keep(uint64_t stream, int64_t i, double p) {
  return static_cast<double>(mix(stream + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1.0p-53 >= p;
}
uint64_t dropout_stream(const Graph& g, const Node& n) {
  return mix(mix(g.seed() ^ 0x5eed) + mix(g.step() + 1) * 31 + static_cast<uint64_t>(n.index));
}

template <typename T>
void dropout_forward_kernel(Graph& g, const Node& n) {
  const double p = n.attr.f[0];
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  if (!g.training() || p == 0) {
    for_each<T>(numel(g, n), [&](int64_t i) { y[i] = x[i]; });
    return;
  }
  const uint64_t stream = dropout_stream(g, n);
  const T inv_keep = static_cast<T>(1 / (1 - p));
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = keep(stream, i, p) ? x[i] * inv_keep : T(0); });
}
template <typename T>
void dropout_backward_kernel(Graph& g, const Node& n) {
  const double p = n.attr.f[0];
  const T* dy = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
  if (!g.training() || p == 0) {
    for_each<T>(numel(g, n), [&](int64_t i) { dx[i] += dy[i]; });
    return;
  }
  const uint64_t stream = dropout_stream(g, n);
  const T inv_keep = static_cast<T>(1 / (1 - p));
  for_each<T>(numel(g, n), [&](int64_t i) { dx[i] += keep(stream, i, p) ? dy[i] * inv_keep : T(0); });
}

#define NORMLAB_FLOAT_OP(name)                                                                                   \
  void name##_forward(Graph& g, const Node& n) {                                                                 \
    dispatch_float(g.float_type(), [&]<typename T>() { name##_forward_kernel<T>(g, n); });                      \
  }                                                                                                              \
  void name##_backward(Graph& g, const Node& n) {                                                                \
    dispatch_float(g.float_type(), [&]<typename T>() { name##_backward_kernel<T>(g, n); });                     \
  }
NORMLAB_FLOAT_OP(add)
NORMLAB_FLOAT_OP(scale)
NORMLAB_FLOAT_OP(gelu)
NORMLAB_FLOAT_OP(swiglu)
NORMLAB_FLOAT_OP(dropout)
#undef NORMLAB_FLOAT_OP

TensorId unary(Graph& g, OpKind op, const std::string& name, TensorId x, double attr) {
  Node n = make_node(op, x);
  n.out = like(g, name, x, {x});
  n.attr.f[0] = attr;
  g.record(n);
  return n.out;
}

TensorId binary(Graph& g, OpKind op, const std::string& name, TensorId a, TensorId b, double alpha, double beta) {
  if (g.shape(a) != g.shape(b))
    fail("internal: {} of '{}' {} and '{}' {}", op_def(op).name, g.spec(a).name, g.shape(a).str(), g.spec(b).name, g.shape(b).str());
  Node n = make_node(op, a, b);
  n.out = like(g, name, a, {a, b});
  n.attr.f = {alpha, beta, 0, 0};
  g.record(n);
  return n.out;
}

}  // namespace

extern const OpDef kAddOp{"add", add_forward, add_backward};
extern const OpDef kScaleOp{"scale", scale_forward, scale_backward};
extern const OpDef kGeluOp{"gelu", gelu_forward, gelu_backward};
extern const OpDef kSwigluOp{"swiglu", swiglu_forward, swiglu_backward};
extern const OpDef kDropoutOp{"dropout", dropout_forward, dropout_backward};

TensorId add(Graph& g, const std::string& name, TensorId a, TensorId b, double alpha, double beta) {
  return binary(g, OpKind::add, name, a, b, alpha, beta);
}
TensorId scale(Graph& g, const std::string& name, TensorId x, double c) { return unary(g, OpKind::scale, name, x, c); }
TensorId gelu(Graph& g, const std::string& name, TensorId x) { return unary(g, OpKind::gelu, name, x, 0); }
TensorId swiglu(Graph& g, const std::string& name, TensorId gate, TensorId up) {
  return binary(g, OpKind::swiglu, name, gate, up, 0, 0);
}
TensorId dropout(Graph& g, const std::string& name, TensorId x, double p) { return unary(g, OpKind::dropout, name, x, p); }

}  // namespace normlab::engine
