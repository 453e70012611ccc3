// Linear layer, y = x Wᵀ + b, with x [N, in], W [out, in] (PyTorch's layout), b [out].
//
//   ∂L/∂x = g W,   ∂L/∂W = gᵀ x,   ∂L/∂b = Σ_rows g          (g = ∂L/∂y, [N, out])
//
// All three products are GEMMs; the backward ones run with beta = 1 to accumulate, except ∂L/∂W's first write
// after zero_param_grads(), which stores it (beta = 0; Graph::overwrites_weight_grad).
//
// Centered (Pre-RMSNorm's efficient form, Jiang et al. 2023 §3.1): every output row has zero mean, y = C(x Wᵀ + b)
// with C = I − 11ᵀ/out the centering projection on the output axis. C folds into the parameters:
//
//   y = x W_cᵀ + b_c,   W_c = W − 1·mean_out(W) (each column minus its mean),   b_c = b − mean(b)
//   ∂L/∂x = g W_c,   ∂L/∂W = C (gᵀ x),   ∂L/∂b = C Σ_rows g         (C is symmetric: C ∂L/∂W_c)
//
// so the centering costs a pass over W (out × in) per step instead of one over the activations (N × out) forward
// and backward. Saved: W_c and b_c.
//
// Fused with a GELU that reads y (linear_gelu, the FFN's first map; engine/fusion.h): z = GELU(y) is computed on
// each row of y as its bias is added, and backward first forms g = ∂L/∂y += ∂L/∂z ⊙ GELU'(y) row by row, summing
// the finished rows into ∂L/∂b in the same pass (a plain bias; a centered one keeps its own pass).
#include <algorithm>
#include <utility>

#include "engine/fast_math.h"
#include "engine/fusion.h"
#include "engine/gemm.h"
#include "engine/ops.h"
#include "engine/parallel.h"

namespace normlab::engine {
namespace {

enum Slot { kX, kWeight, kBias };

bool centered(const Node& n) { return n.attr.i[0] != 0; }

// dst = src − its mean over the rows (axis 0) of a [rows, cols] matrix, column by column; or dst += that. Blocks of
// columns are read row by row (contiguous), each thread owning whole blocks.
template <typename T>
void center_columns(int64_t rows, int64_t cols, const T* src, T* dst, bool accumulate) {
  constexpr int64_t kBlock = 64;
#pragma omp parallel for schedule(static) if (parallel_pays(rows * cols))
  for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
    const int64_t width = std::min(kBlock, cols - c0);
    T mean[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < width; ++j) mean[j] += src[r * cols + c0 + j];
    for (int64_t j = 0; j < width; ++j) mean[j] /= static_cast<T>(rows);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < width; ++j) {
        const int64_t at = r * cols + c0 + j;
        dst[at] = (accumulate ? dst[at] : T(0)) + src[at] - mean[j];
      }
  }
}

// The weight and bias the GEMMs use: W and b, or their centered copies (computed here in the forward pass).
template <typename T>
std::pair<const T*, const T*> effective(Graph& g, const Node& n, bool compute) {
  const T* b = n.in[kBias] == kNoTensor ? nullptr : g.data<T>(n.in[kBias]);
  if (!centered(n)) return {g.data<T>(n.in[kWeight]), b};
  const int64_t in = g.shape(n.in[kWeight])[1], out = g.shape(n.in[kWeight])[0];
  T *w_c = g.data<T>(n.saved[0]), *b_c = b ? g.data<T>(n.saved[1]) : nullptr;
  if (compute) {
    center_columns<T>(out, in, g.data<T>(n.in[kWeight]), w_c, false);
    if (b) center_columns<T>(out, 1, b, b_c, false);
  }
  return {w_c, b_c};
}

// gelu: the GELU node fused after this one (it reads y), or nullptr.
template <typename T>
void forward_kernel(Graph& g, const Node& n, const Node* gelu) {
  const int64_t rows = g.shape(n.in[kX]).rows(), in = g.shape(n.in[kWeight])[1], out = g.shape(n.in[kWeight])[0];
  // Plain pointers, not a structured binding: clang 14 cannot capture a binding in the OpenMP region below.
  const std::pair<const T*, const T*> weight_bias = effective<T>(g, n, true);
  const T *w = weight_bias.first, *b = weight_bias.second;
  T* y = g.data<T>(n.out);
  T* z = gelu ? g.data<T>(gelu->out) : nullptr;
  gemm(false, true, rows, out, in, T(1), g.data<T>(n.in[kX]), in, w, in, T(0), y, out);
  if (!b && !z) return;
#pragma omp parallel for schedule(static) if (parallel_pays(rows * out))
  for (int64_t r = 0; r < rows; ++r) {
    T* yr = y + r * out;
    if (b)
      for (int64_t j = 0; j < out; ++j) yr[j] += b[j];
    if (z)
      for (int64_t j = r * out; j < (r + 1) * out; ++j) z[j] = gelu_of(y[j]);
  }
}

template <typename T>
void backward_kernel(Graph& g, const Node& n, const Node* gelu) {
  const int64_t rows = g.shape(n.in[kX]).rows(), in = g.shape(n.in[kWeight])[1], out = g.shape(n.in[kWeight])[0];
  T* dy = g.grad<T>(n.out);
  const T* w = effective<T>(g, n, false).first;
  // The fused GELU's backward comes first: the GEMMs need the finished ∂L/∂y.
  const bool bias_in_gelu_pass = gelu && g.requires_grad(n.in[kBias]) && !centered(n);
  if (gelu) {
    const T *y = g.data<T>(n.out), *dz = g.grad<T>(gelu->out);
    auto finish_row = [&](int64_t r) {  // the gelu op's loop (ops/elementwise.cpp), so the two agree bit for bit
      for (int64_t j = r * out; j < (r + 1) * out; ++j) dy[j] += dz[j] * gelu_slope(y[j]);
    };
    if (bias_in_gelu_pass)
      reduce_rows<T>(rows, out, 1, g.grad<T>(n.in[kBias]), g.workspace(), [&](int64_t r, T* acc) {
        finish_row(r);
        for (int64_t j = 0; j < out; ++j) acc[j] += dy[r * out + j];
      });
    else {
#pragma omp parallel for schedule(static) if (parallel_pays(rows * out))
      for (int64_t r = 0; r < rows; ++r) finish_row(r);
    }
  }
  if (g.requires_grad(n.in[kX])) gemm(false, false, rows, in, out, T(1), dy, out, w, in, T(1), g.grad<T>(n.in[kX]), in);
  // Centered: the products land in scratch after reduce_rows' own, then C is applied as they are added.
  T* scratch = reinterpret_cast<T*>(g.workspace() + reduce_rows_workspace<double>(out, 1));
  if (g.requires_grad(n.in[kWeight])) {
    const bool overwrite = g.overwrites_weight_grad(n);  // the first write since zero_param_grads() (graph.h)
    if (!centered(n))
      gemm(true, false, out, in, rows, T(1), dy, out, g.data<T>(n.in[kX]), in, overwrite ? T(0) : T(1),
           g.grad<T>(n.in[kWeight]), in);
    else {
      gemm(true, false, out, in, rows, T(1), dy, out, g.data<T>(n.in[kX]), in, T(0), scratch, in);
      center_columns<T>(out, in, scratch, g.grad<T>(n.in[kWeight]), !overwrite);
    }
  }
  if (g.requires_grad(n.in[kBias]) && !bias_in_gelu_pass) {
    T* db = centered(n) ? scratch : g.grad<T>(n.in[kBias]);
    if (centered(n)) std::fill(db, db + out, T(0));
    reduce_rows<T>(rows, out, 1, db, g.workspace(), [&](int64_t r, T* acc) {
      for (int64_t j = 0; j < out; ++j) acc[j] += dy[r * out + j];
    });
    if (centered(n)) center_columns<T>(out, 1, db, g.grad<T>(n.in[kBias]), true);
  }
}

void forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { forward_kernel<T>(g, n, nullptr); });
}
void backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { backward_kernel<T>(g, n, nullptr); });
}
// Called with the linear node; the GELU is the node after it.
void fused_forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { forward_kernel<T>(g, n, &fused_partner(g, n)); });
}
void fused_backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { backward_kernel<T>(g, n, &fused_partner(g, n)); });
}

}  // namespace

extern const OpKernels linear_kernels{forward, backward};
extern const OpKernels linear_gelu_kernels{fused_forward, fused_backward};

TensorId linear(Graph& g, const std::string& name, TensorId x, TensorId weight, TensorId bias, bool centered) {
  Shape out_shape = g.shape(x);
  const int64_t out = g.shape(weight)[0], in = g.shape(weight)[1];
  out_shape.dims[static_cast<size_t>(out_shape.rank - 1)] = out;
  Node n = make_node(OpKind::linear, x, weight, bias);
  n.out = g.activation(name, out_shape, g.requires_grad(x) || g.requires_grad(weight) || g.requires_grad(bias));
  n.workspace_bytes = reduce_rows_workspace<double>(out, 1);
  if (centered) {
    n.attr.i[0] = 1;
    n.saved[0] = g.activation(name + ".centered_weight", Shape{out, in}, false);
    if (bias != kNoTensor) n.saved[1] = g.activation(name + ".centered_bias", Shape{out}, false);
    n.workspace_bytes += static_cast<size_t>(out * in) * sizeof(double);
  }
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
