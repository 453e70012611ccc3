// Elementwise ops, each with its derivative:
//
//   add:     y = α·a + β·b             ∂L/∂a = α·g,  ∂L/∂b = β·g
//   scale:   y = c·x                   ∂L/∂x = c·g
//   gelu:    y = x·Φ(x)                ∂y/∂x = Φ(x) + x·φ(x)        (exact erf form, as torch's default)
//   gelu_tanh: y = ½x(1 + tanh u) = x·σ(2u),  u = √(2/π)(x + 0.044715x³)
//            ∂y/∂x = σ(2u) + x·σ(2u)(1 − σ(2u))·2√(2/π)(1 + 3·0.044715x²)   (σ' = σ(1 − σ); fast_math.h)
//   relu:    y = max(x, 0)             ∂y/∂x = 1 for x > 0, 0 otherwise (0 at the kink, as torch)
//   gated:   y = act(a) ⊙ u            ∂L/∂a = g ⊙ u ⊙ act'(a),  ∂L/∂u = g ⊙ act(a)
//            SwiGLU: act = SiLU, SiLU'(a) = σ(a)(1 + a(1 − σ(a)));  GeGLU: act = GELU, exact or its tanh form
//   center:  y = x − mean(x) (per row)  ∂L/∂x = g − mean(g)
//   softcap: y = c·tanh(x/c)            ∂y/∂x = 1 − tanh²(x/c)
//   dropout: y = x ⊙ m / (1 − p)       ∂L/∂x = g ⊙ m / (1 − p); m is recomputed from a counter-based
//            hash of (seed, step, node, element), so nothing is stored and resume replays the same masks;
//            the element is counted in the whole batch, so a data-parallel rank draws its rows' masks.
#include <cmath>
#include <numbers>

#include "engine/fast_math.h"
#include "engine/ops.h"
#include "engine/parallel.h"

namespace normlab::engine {
namespace {

template <typename T, typename Fn>
void for_each(int64_t count, Fn fn) {
#pragma omp parallel for schedule(static) if (parallel_pays(count))
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

// GELU and Φ are engine/fast_math.h's (vectorizable in fp32, libm's erfc in fp64). A gelu right after a linear map
// runs fused with it (linear_gelu, ops/linear.cpp), which works row by row; these loops go row by row too, so each
// element takes the same vector or remainder path in both and the two agree bit for bit.
template <typename T>
void gelu_forward_kernel(Graph& g, const Node& n) {
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  const int64_t width = g.shape(n.out).last();
#pragma omp parallel for schedule(static) if (parallel_pays(numel(g, n)))
  for (int64_t r = 0; r < g.shape(n.out).rows(); ++r)
    for (int64_t j = r * width; j < (r + 1) * width; ++j) y[j] = gelu_of(x[j]);
}
template <typename T>
void gelu_backward_kernel(Graph& g, const Node& n) {
  const T *x = g.data<T>(n.in[0]), *dy = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
  const int64_t width = g.shape(n.out).last();
#pragma omp parallel for schedule(static) if (parallel_pays(numel(g, n)))
  for (int64_t r = 0; r < g.shape(n.out).rows(); ++r)
    for (int64_t j = r * width; j < (r + 1) * width; ++j) dx[j] += dy[j] * gelu_slope(x[j]);
}

// Not fused with the linear map before it (only GELU's erf form is: fusion.h), so a flat loop.
template <typename T>
void gelu_tanh_forward_kernel(Graph& g, const Node& n) {
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = gelu_tanh_of(x[i]); });
}
template <typename T>
void gelu_tanh_backward_kernel(Graph& g, const Node& n) {
  const T *x = g.data<T>(n.in[0]), *dy = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
  for_each<T>(numel(g, n), [&](int64_t i) { dx[i] += dy[i] * gelu_tanh_slope(x[i]); });
}

template <typename T>
void relu_forward_kernel(Graph& g, const Node& n) {
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = x[i] > T(0) ? x[i] : T(0); });
}
template <typename T>
void relu_backward_kernel(Graph& g, const Node& n) {
  const T *x = g.data<T>(n.in[0]), *dy = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
  for_each<T>(numel(g, n), [&](int64_t i) { dx[i] += x[i] > T(0) ? dy[i] : T(0); });
}

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + fast_exp(-x));
}

enum class Gate : int64_t { silu, gelu, gelu_tanh };

// act(a) and act'(a) of a gated unit.
template <typename T>
std::pair<T, T> activation(Gate kind, T a) {
  if (kind == Gate::gelu) return {gelu_of(a), gelu_slope(a)};
  if (kind == Gate::gelu_tanh) return {gelu_tanh_of(a), gelu_tanh_slope(a)};
  const T s = sigmoid(a);
  return {a * s, s * (T(1) + a * (T(1) - s))};
}

template <typename T>
void gated_forward_kernel(Graph& g, const Node& n) {
  const auto kind = static_cast<Gate>(n.attr.i[0]);
  const T *a = g.data<T>(n.in[0]), *u = g.data<T>(n.in[1]);
  T* y = g.data<T>(n.out);
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = activation(kind, a[i]).first * u[i]; });
}
template <typename T>
void gated_backward_kernel(Graph& g, const Node& n) {
  const auto kind = static_cast<Gate>(n.attr.i[0]);
  const T *a = g.data<T>(n.in[0]), *u = g.data<T>(n.in[1]), *dy = g.grad<T>(n.out);
  T* da = g.requires_grad(n.in[0]) ? g.grad<T>(n.in[0]) : nullptr;
  T* du = g.requires_grad(n.in[1]) ? g.grad<T>(n.in[1]) : nullptr;
  for_each<T>(numel(g, n), [&](int64_t i) {
    const auto [act, slope] = activation(kind, a[i]);
    if (da) da[i] += dy[i] * u[i] * slope;
    if (du) du[i] += dy[i] * act;
  });
}

template <typename T>
void center_forward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.out).rows(), w = g.shape(n.out).last();
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
#pragma omp parallel for schedule(static) if (parallel_pays(rows * w))
  for (int64_t r = 0; r < rows; ++r) {
    T mean = 0;
    for (int64_t i = 0; i < w; ++i) mean += x[r * w + i];
    mean /= static_cast<T>(w);
    for (int64_t i = 0; i < w; ++i) y[r * w + i] = x[r * w + i] - mean;
  }
}
template <typename T>
void center_backward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.out).rows(), w = g.shape(n.out).last();
  const T* dy = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
#pragma omp parallel for schedule(static) if (parallel_pays(rows * w))
  for (int64_t r = 0; r < rows; ++r) {
    T mean = 0;
    for (int64_t i = 0; i < w; ++i) mean += dy[r * w + i];
    mean /= static_cast<T>(w);
    for (int64_t i = 0; i < w; ++i) dx[r * w + i] += dy[r * w + i] - mean;
  }
}

template <typename T>
void softcap_forward_kernel(Graph& g, const Node& n) {
  const T c = static_cast<T>(n.attr.f[0]);
  const T* x = g.data<T>(n.in[0]);
  T* y = g.data<T>(n.out);
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = c * std::tanh(x[i] / c); });
}
template <typename T>
void softcap_backward_kernel(Graph& g, const Node& n) {
  const T c = static_cast<T>(n.attr.f[0]);
  const T *x = g.data<T>(n.in[0]), *dy = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
  for_each<T>(numel(g, n), [&](int64_t i) {
    const T t = std::tanh(x[i] / c);
    dx[i] += dy[i] * (T(1) - t * t);
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
  const int64_t offset = g.shard_offset(numel(g, n));
  for_each<T>(numel(g, n), [&](int64_t i) { y[i] = keep(stream, offset + i, p) ? x[i] * inv_keep : T(0); });
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
  const int64_t offset = g.shard_offset(numel(g, n));
  for_each<T>(numel(g, n), [&](int64_t i) { dx[i] += keep(stream, offset + i, p) ? dy[i] * inv_keep : T(0); });
}

NORMLAB_FLOAT_OP(add)
NORMLAB_FLOAT_OP(scale)
NORMLAB_FLOAT_OP(gelu)
NORMLAB_FLOAT_OP(gelu_tanh)
NORMLAB_FLOAT_OP(relu)
NORMLAB_FLOAT_OP(gated)
NORMLAB_FLOAT_OP(center)
NORMLAB_FLOAT_OP(softcap)
NORMLAB_FLOAT_OP(dropout)

TensorId unary(Graph& g, OpKind op, const std::string& name, TensorId x, double attr) {
  Node n = make_node(op, x);
  n.out = like(g, name, x, {x});
  n.attr.f[0] = attr;
  g.record(n);
  return n.out;
}

TensorId binary(Graph& g, OpKind op, const std::string& name, TensorId a, TensorId b, double alpha, double beta) {
  if (g.shape(a) != g.shape(b))
    fail("internal: {} of '{}' {} and '{}' {}", op_def(op).name, g.spec(a).name, g.shape(a).str(), g.spec(b).name,
         g.shape(b).str());
  Node n = make_node(op, a, b);
  n.out = like(g, name, a, {a, b});
  n.attr.f = {alpha, beta, 0, 0};
  g.record(n);
  return n.out;
}

TensorId gated(Graph& g, const std::string& name, TensorId gate, TensorId up, Gate kind) {
  if (g.shape(gate) != g.shape(up)) fail("internal: gated unit of {} and {}", g.shape(gate).str(), g.shape(up).str());
  Node n = make_node(OpKind::gated, gate, up);
  n.out = like(g, name, gate, {gate, up});
  n.attr.i[0] = static_cast<int64_t>(kind);
  g.record(n);
  return n.out;
}

}  // namespace

extern const OpKernels add_kernels{add_forward, add_backward};
extern const OpKernels scale_kernels{scale_forward, scale_backward};
extern const OpKernels gelu_kernels{gelu_forward, gelu_backward};
extern const OpKernels gelu_tanh_kernels{gelu_tanh_forward, gelu_tanh_backward};
extern const OpKernels relu_kernels{relu_forward, relu_backward};
extern const OpKernels gated_kernels{gated_forward, gated_backward};
extern const OpKernels center_kernels{center_forward, center_backward};
extern const OpKernels softcap_kernels{softcap_forward, softcap_backward};
extern const OpKernels dropout_kernels{dropout_forward, dropout_backward};

TensorId add(Graph& g, const std::string& name, TensorId a, TensorId b, double alpha, double beta) {
  return binary(g, OpKind::add, name, a, b, alpha, beta);
}
TensorId scale(Graph& g, const std::string& name, TensorId x, double c) { return unary(g, OpKind::scale, name, x, c); }
TensorId gelu(Graph& g, const std::string& name, TensorId x) { return unary(g, OpKind::gelu, name, x, 0); }
TensorId gelu_tanh(Graph& g, const std::string& name, TensorId x) { return unary(g, OpKind::gelu_tanh, name, x, 0); }
TensorId relu(Graph& g, const std::string& name, TensorId x) { return unary(g, OpKind::relu, name, x, 0); }
TensorId swiglu(Graph& g, const std::string& name, TensorId gate, TensorId up) {
  return gated(g, name, gate, up, Gate::silu);
}
TensorId geglu(Graph& g, const std::string& name, TensorId gate, TensorId up) {
  return gated(g, name, gate, up, Gate::gelu);
}
TensorId geglu_tanh(Graph& g, const std::string& name, TensorId gate, TensorId up) {
  return gated(g, name, gate, up, Gate::gelu_tanh);
}
TensorId center(Graph& g, const std::string& name, TensorId x) { return unary(g, OpKind::center, name, x, 0); }
TensorId softcap(Graph& g, const std::string& name, TensorId x, double cap) {
  return unary(g, OpKind::softcap, name, x, cap);
}
TensorId dropout(Graph& g, const std::string& name, TensorId x, double p) {
  return unary(g, OpKind::dropout, name, x, p);
}

}  // namespace normlab::engine
