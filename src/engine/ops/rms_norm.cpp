// RMSNorm (Zhang & Sennrich 2019), per row x ∈ R^d:
//
//   m = mean(x²),  r = (m + ε)^(−1/2),  x̂ = x·r,  y = (γ + o) ⊙ x̂
//
// o is the gain offset: 0 for the plain form (γ starts at 1), 1 for Gemma's (1 + s) form (s starts at 0).
// Backward, with ĝ = (γ + o) ⊙ g (the Jacobian ∂x̂/∂x = r·(I − x̂x̂ᵀ/d), no mean-removal term):
//
//   ∂L/∂x = r · [ ĝ − x̂ · mean(ĝ ⊙ x̂) ],    ∂L/∂γ = Σ_rows g ⊙ x̂
//
// Sampled statistics (an inference-time option, as in layer_norm.cpp): m from every s-th feature; no backward.
//
// Saved for backward: r per row. γ is optional (a non-affine RMSNorm). The row sums are `omp simd` reductions,
// as in layer_norm.cpp. Fused with the residual add in front of it: add_rms_norm (fusion.h).
#include <algorithm>
#include <cmath>

#include "engine/fusion.h"
#include "engine/ops.h"
#include "engine/parallel.h"

namespace normlab::engine {
namespace {

enum Slot { kX, kGain };

// sum: the add node fused in front (its output is x), or nullptr.
template <typename T>
void rms_norm_forward_kernel(Graph& g, const Node& n, const Node* sum) {
  const int64_t rows = g.shape(n.out).rows(), d = g.shape(n.out).last();
  const T eps = static_cast<T>(n.attr.f[0]), offset = static_cast<T>(n.attr.f[1]);
  const int64_t stride = std::max<int64_t>(n.attr.i[kNormSamplingSlot], 1);
  const T sampled = static_cast<T>((d + stride - 1) / stride);
  const FusedSum<T> producer(g, sum);
  const T* x = g.data<T>(n.in[kX]);
  const T* gain = n.in[kGain] == kNoTensor ? nullptr : g.data<T>(n.in[kGain]);
  T* y = g.data<T>(n.out);
  T* rstd = g.data<T>(n.saved[0]);
#pragma omp parallel for schedule(static) if (parallel_pays(rows * d))
  for (int64_t r = 0; r < rows; ++r) {
    if (sum) producer.forward_row(r, d);
    const T* xr = x + r * d;
    T* yr = y + r * d;
    T ms = 0;
    if (stride == 1) {
#pragma omp simd reduction(+ : ms)
      for (int64_t i = 0; i < d; ++i) ms += xr[i] * xr[i];
      ms /= static_cast<T>(d);
    } else {
      for (int64_t i = 0; i < d; i += stride) ms += xr[i] * xr[i];
      ms /= sampled;
    }
    const T rs = T(1) / std::sqrt(ms + eps);
    rstd[r] = rs;
    for (int64_t i = 0; i < d; ++i) yr[i] = (gain ? gain[i] + offset : T(1)) * xr[i] * rs;
  }
}

template <typename T>
void rms_norm_backward_kernel(Graph& g, const Node& n, const Node* sum) {
  if (n.attr.i[kNormSamplingSlot] > 1)
    fail("internal: a norm with sampled statistics (an inference-time option) has no backward");
  const int64_t rows = g.shape(n.out).rows(), d = g.shape(n.out).last();
  const T offset = static_cast<T>(n.attr.f[1]);
  const FusedSum<T> producer(g, sum);
  const T* x = g.data<T>(n.in[kX]);
  const T* gain = n.in[kGain] == kNoTensor ? nullptr : g.data<T>(n.in[kGain]);
  const T* dy = g.grad<T>(n.out);
  const T* rstd = g.data<T>(n.saved[0]);
  if (g.requires_grad(n.in[kX])) {
    T* dx = g.grad<T>(n.in[kX]);
#pragma omp parallel for schedule(static) if (parallel_pays(rows * d))
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = x + r * d, *gr = dy + r * d;
      const T rs = rstd[r];
      T mean_gx = 0;
#pragma omp simd reduction(+ : mean_gx)
      for (int64_t i = 0; i < d; ++i) mean_gx += (gain ? gain[i] + offset : T(1)) * gr[i] * xr[i] * rs;
      mean_gx /= static_cast<T>(d);
      T* dxr = dx + r * d;
      for (int64_t i = 0; i < d; ++i) dxr[i] += rs * ((gain ? gain[i] + offset : T(1)) * gr[i] - xr[i] * rs * mean_gx);
      if (sum) producer.backward_row(r, d);
    }
  }
  if (g.requires_grad(n.in[kGain])) {
    reduce_rows<T>(rows, d, 1, g.grad<T>(n.in[kGain]), g.workspace(), [&](int64_t r, T* acc) {
      const T *xr = x + r * d, *gr = dy + r * d;
      for (int64_t i = 0; i < d; ++i) acc[i] += gr[i] * xr[i] * rstd[r];
    });
  }
}

NORMLAB_FUSABLE_NORM_OP(rms_norm)

}  // namespace

extern const OpKernels rms_norm_kernels{rms_norm_forward, rms_norm_backward};
extern const OpKernels add_rms_norm_kernels{rms_norm_fused_forward, rms_norm_fused_backward};

TensorId rms_norm(Graph& g, const std::string& name, TensorId x, TensorId gain, double eps, double gain_offset) {
  Node n = make_node(OpKind::rms_norm, x, gain);
  n.out = like(g, name, x, {x, gain});
  n.saved[0] = g.activation(name + ".rstd", Shape{g.shape(x).rows()}, false);
  n.attr.f = {eps, gain_offset, 0, 0};
  n.workspace_bytes = reduce_rows_workspace<double>(g.shape(x).last(), 1);
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
