// Linear layer, y = x Wᵀ + b, with x [N, in], W [out, in] (PyTorch's layout), b [out].
//
//   ∂L/∂x = g W,   ∂L/∂W = gᵀ x,   ∂L/∂b = Σ_rows g          (g = ∂L/∂y, [N, out])
//
// All three products are GEMMs; the backward ones run with beta = 1 to accumulate.
#include "engine/gemm.h"
#include "engine/ops.h"
#include "engine/parallel.h"

namespace normlab::engine {
namespace {

enum Slot { kX, kWeight, kBias };

template <typename T>
void forward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.in[kX]).rows(), in = g.shape(n.in[kWeight])[1], out = g.shape(n.in[kWeight])[0];
  T* y = g.data<T>(n.out);
  gemm(false, true, rows, out, in, T(1), g.data<T>(n.in[kX]), in, g.data<T>(n.in[kWeight]), in, T(0), y, out);
  if (n.in[kBias] == kNoTensor) return;
  const T* b = g.data<T>(n.in[kBias]);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out; ++j) y[r * out + j] += b[j];
}

template <typename T>
void backward_kernel(Graph& g, const Node& n) {
  const int64_t rows = g.shape(n.in[kX]).rows(), in = g.shape(n.in[kWeight])[1], out = g.shape(n.in[kWeight])[0];
  const T* dy = g.grad<T>(n.out);
  if (g.requires_grad(n.in[kX]))
    gemm(false, false, rows, in, out, T(1), dy, out, g.data<T>(n.in[kWeight]), in, T(1), g.grad<T>(n.in[kX]), in);
  if (g.requires_grad(n.in[kWeight]))
    gemm(true, false, out, in, rows, T(1), dy, out, g.data<T>(n.in[kX]), in, T(1), g.grad<T>(n.in[kWeight]), in);
  if (g.requires_grad(n.in[kBias]))
    reduce_rows<T>(rows, out, 1, g.grad<T>(n.in[kBias]), g.workspace(), [&](int64_t r, T* acc) {
      for (int64_t j = 0; j < out; ++j) acc[j] += dy[r * out + j];
    });
}

void forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { forward_kernel<T>(g, n); });
}
void backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { backward_kernel<T>(g, n); });
}

}  // namespace

extern const OpKernels linear_kernels{forward, backward};

TensorId linear(Graph& g, const std::string& name, TensorId x, TensorId weight, TensorId bias) {
  Shape out_shape = g.shape(x);
  out_shape.dims[static_cast<size_t>(out_shape.rank - 1)] = g.shape(weight)[0];
  Node n = make_node(OpKind::linear, x, weight, bias);
  n.out = g.activation(name, out_shape, g.requires_grad(x) || g.requires_grad(weight) || g.requires_grad(bias));
  n.workspace_bytes = reduce_rows_workspace<double>(g.shape(weight)[0], 1);
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
