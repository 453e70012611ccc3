// Token embedding and absolute positions, learned or fixed.
//
// embedding:     out[r] = E[id_r]                 ∂L/∂E[v] = Σ_{r: id_r = v} g[r]
// position_add:  out[b,t] = x[b,t] + P[o+t]       ∂L/∂x = g,  ∂L/∂P[o+t] = Σ_b g[b,t]
// sinusoid_add:  out[b,t] = x[b,t] + PE[o+t]      ∂L/∂x = g   (PE has no parameters)
//   PE[p, 2i] = sin(p / 10000^(2i/w)),  PE[p, 2i+1] = cos(p / 10000^(2i/w))   (Vaswani et al. 2017, §3.5; w = x's
//   width; an odd w ends with a sine). Each forward writes the T rows it needs in double, rounded once to the
//   graph's type, into a saved [T, w] table, so fp32 and fp64 models see the same sinusoids up to that rounding.
//   (o = 0, or the chunk's first position when decoding with a key-value cache)
//
// The scatter-add into E is parallel over column blocks (each thread owns a slice of every row),
// so it needs no atomics and its sums do not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "engine/ops.h"

namespace normlab::engine {
namespace {

template <typename T>
void embedding_forward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.out).rows(), d = g.shape(n.out).last();
  const int32_t* ids = g.data<int32_t>(n.in[0]);
  const T* table = g.data<T>(n.in[1]);
  T* out = g.data<T>(n.out);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) std::copy_n(table + ids[r] * d, d, out + r * d);
}

template <typename T>
void embedding_backward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.out).rows(), d = g.shape(n.out).last();
  const int32_t* ids = g.data<int32_t>(n.in[0]);
  const T* dout = g.grad<T>(n.out);
  T* dtable = g.grad<T>(n.in[1]);
  constexpr int64_t kBlock = 16;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < d; c0 += kBlock) {
    const int64_t c1 = std::min(d, c0 + kBlock);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = c0; c < c1; ++c) dtable[ids[r] * d + c] += dout[r * d + c];
  }
}

// The row of P at the chunk's first position.
template <typename T>
T* first_position(Graph& g, const Node& n, T* table) {
  const int64_t offset = n.in[2] == kNoTensor ? 0 : *g.data<int32_t>(n.in[2]);
  const int64_t time = g.shape(n.out)[1], positions = g.shape(n.in[1])[0];
  if (offset < 0 || offset + time > positions)
    fail("internal: positions {}..{} are outside the table of {}", offset, offset + time - 1, positions);
  return table + offset * g.shape(n.in[1])[1];
}

// out[b, t] = x[b, t] + pos[t] of a node's x and out [batch, time, d] and rows pos [time, d].
template <typename T>
void add_position_rows(Graph& g, const Node& n, const T* pos) {
  const Shape& s = g.shape(n.out);
  const int64_t batch = s[0], time = s[1], d = s[2];
  const T* x = g.data<T>(n.in[0]);
  T* out = g.data<T>(n.out);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < time; ++t)
      for (int64_t c = 0; c < d; ++c) out[(b * time + t) * d + c] = x[(b * time + t) * d + c] + pos[t * d + c];
}

template <typename T>
void position_forward_kernel(Graph& g, const Node& n) {
  add_position_rows(g, n, first_position(g, n, g.data<T>(n.in[1])));
}

template <typename T>
void position_backward_kernel(Graph& g, const Node& n) {
  const Shape& s = g.shape(n.out);
  const int64_t batch = s[0], time = s[1], d = s[2];
  const T* dout = g.grad<T>(n.out);
  if (g.requires_grad(n.in[0])) {
    T* dx = g.grad<T>(n.in[0]);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch * time * d; ++i) dx[i] += dout[i];
  }
  if (g.requires_grad(n.in[1])) {
    T* dpos = first_position(g, n, g.grad<T>(n.in[1]));
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < time; ++t)
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t c = 0; c < d; ++c) dpos[t * d + c] += dout[(b * time + t) * d + c];
  }
}

int64_t position_offset(const Graph& g, const Node& n) { return n.in[1] == kNoTensor ? 0 : *g.data<int32_t>(n.in[1]); }

template <typename T>
void sinusoid_forward_kernel(Graph& g, const Node& n) {
  const Shape& s = g.shape(n.out);
  const int64_t time = s[1], w = s[2], first = position_offset(g, n);
  T* table = g.data<T>(n.saved[0]);
  for (int64_t t = 0; t < time; ++t)
    for (int64_t c = 0; c < w; ++c) {
      const double angle = static_cast<double>(first + t) * std::pow(10000.0, -static_cast<double>(c - c % 2) / w);
      table[t * w + c] = static_cast<T>(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  add_position_rows<T>(g, n, table);
}

template <typename T>
void sinusoid_backward_kernel(Graph& g, const Node& n) {
  const int64_t count = g.shape(n.out).numel();
  const T* dout = g.grad<T>(n.out);
  T* dx = g.grad<T>(n.in[0]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) dx[i] += dout[i];
}

void embedding_forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { embedding_forward_kernel<T>(g, n); });
}
void embedding_backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { embedding_backward_kernel<T>(g, n); });
}
void position_forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { position_forward_kernel<T>(g, n); });
}
void position_backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { position_backward_kernel<T>(g, n); });
}
NORMLAB_FLOAT_OP(sinusoid)

}  // namespace

extern const OpKernels embedding_kernels{embedding_forward, embedding_backward};
extern const OpKernels position_add_kernels{position_forward, position_backward};
extern const OpKernels sinusoid_add_kernels{sinusoid_forward, sinusoid_backward};

TensorId embedding(Graph& g, const std::string& name, TensorId ids, TensorId table) {
  const Shape& s = g.shape(ids);
  Shape out_shape = s;
  out_shape.dims[static_cast<size_t>(out_shape.rank++)] = g.shape(table)[1];
  Node n = make_node(OpKind::embedding, ids, table);
  n.out = g.activation(name, out_shape, g.requires_grad(table));
  g.record(n);
  return n.out;
}

TensorId position_add(Graph& g, const std::string& name, TensorId x, TensorId positions, TensorId offset) {
  Node n = make_node(OpKind::position_add, x, positions, offset);
  n.out = like(g, name, x, {x, positions});
  g.record(n);
  return n.out;
}

TensorId sinusoid_add(Graph& g, const std::string& name, TensorId x, TensorId offset) {
  const Shape s = g.shape(x);
  if (s.rank != 3) fail("internal: sinusoid_add of '{}' {} needs [batch, time, width]", g.spec(x).name, s.str());
  Node n = make_node(OpKind::sinusoid_add, x, offset);
  n.out = like(g, name, x, {x});
  n.saved[0] = g.activation(name + ".table", Shape{s[1], s[2]}, false);
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
