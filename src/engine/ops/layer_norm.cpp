// LayerNorm (Ba et al. 2016), per row x ∈ R^d, statistics in the working precision (fp32 or fp64):
//
//   μ = mean(x),  v = mean((x − μ)²),  r = (v + ε)^(−1/2),  x̂ = (x − μ)·r,  y = γ ⊙ x̂ + β
//
// Backward, with g = ∂L/∂y and ĝ = γ ⊙ g (the Jacobian ∂x̂/∂x = r·(I − 11ᵀ/d − x̂x̂ᵀ/d)):
//
//   ∂L/∂x = r · [ ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂) ]      (zero-mean, and divided by the input's σ)
//   ∂L/∂γ = Σ_rows g ⊙ x̂,    ∂L/∂β = Σ_rows g
//
// Sampled statistics (an inference-time option, Model's InferenceOptions: every s-th feature, i = 0, s, 2s, ...)
// estimate μ and v from d/s features instead of d; they have no backward here.
//
// Saved for backward: μ and r per row. γ and β are optional (non-affine or bias-free LayerNorm). The row sums
// are `omp simd` reductions: summed across vector lanes in an order fixed by the build, the same for any thread
// count, and at vector speed (a strict left-to-right sum runs at one add per add-latency).
//
// Fused with the residual add in front of it (add_layer_norm; Graph::plan pairs them, see fusion.h):
// x = α·a + β·b is formed row by row and normalized while the row is in cache, and backward hands the row's
// finished ∂L/∂x straight on as α·∂L/∂x and β·∂L/∂x. The arithmetic is the two ops', in the same order.
#include <algorithm>
#include <cmath>

#include "engine/fusion.h"
#include "engine/ops.h"
#include "engine/parallel.h"

namespace normlab::engine {
namespace {

enum Slot { kX, kGain, kBias };

// sum: the add node fused in front (its output is x), or nullptr.
template <typename T>
void layer_norm_forward_kernel(Graph& g, const Node& n, const Node* sum) {
  const int64_t rows = g.shape(n.out).rows(), d = g.shape(n.out).last();
  const T eps = static_cast<T>(n.attr.f[0]);
  const int64_t stride = std::max<int64_t>(n.attr.i[kNormSamplingSlot], 1);
  const T sampled = static_cast<T>((d + stride - 1) / stride);
  const FusedSum<T> producer(g, sum);
  const T* x = g.data<T>(n.in[kX]);
  const T* gain = n.in[kGain] == kNoTensor ? nullptr : g.data<T>(n.in[kGain]);
  const T* bias = n.in[kBias] == kNoTensor ? nullptr : g.data<T>(n.in[kBias]);
  T* y = g.data<T>(n.out);
  T* mean = g.data<T>(n.saved[0]);
  T* rstd = g.data<T>(n.saved[1]);
#pragma omp parallel for schedule(static) if (parallel_pays(rows * d))
  for (int64_t r = 0; r < rows; ++r) {
    if (sum) producer.forward_row(r, d);
    const T* xr = x + r * d;
    T* yr = y + r * d;
    T mu = 0, var = 0;
    if (stride == 1) {
#pragma omp simd reduction(+ : mu)
      for (int64_t i = 0; i < d; ++i) mu += xr[i];
      mu /= static_cast<T>(d);
#pragma omp simd reduction(+ : var)
      for (int64_t i = 0; i < d; ++i) var += (xr[i] - mu) * (xr[i] - mu);
      var /= static_cast<T>(d);
    } else {
      for (int64_t i = 0; i < d; i += stride) mu += xr[i];
      mu /= sampled;
      for (int64_t i = 0; i < d; i += stride) var += (xr[i] - mu) * (xr[i] - mu);
      var /= sampled;
    }
    const T rs = T(1) / std::sqrt(var + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int64_t i = 0; i < d; ++i) {
      T xhat = (xr[i] - mu) * rs;
      yr[i] = (gain ? gain[i] * xhat : xhat) + (bias ? bias[i] : T(0));
    }
  }
}

template <typename T>
void layer_norm_backward_kernel(Graph& g, const Node& n, const Node* sum) {
  if (n.attr.i[kNormSamplingSlot] > 1)
    fail("internal: a norm with sampled statistics (an inference-time option) has no backward");
  const int64_t rows = g.shape(n.out).rows(), d = g.shape(n.out).last();
  const FusedSum<T> producer(g, sum);
  const T* x = g.data<T>(n.in[kX]);
  const T* gain = n.in[kGain] == kNoTensor ? nullptr : g.data<T>(n.in[kGain]);
  const T* dy = g.grad<T>(n.out);
  const T* mean = g.data<T>(n.saved[0]);
  const T* rstd = g.data<T>(n.saved[1]);
  if (g.requires_grad(n.in[kX])) {
    T* dx = g.grad<T>(n.in[kX]);
#pragma omp parallel for schedule(static) if (parallel_pays(rows * d))
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = x + r * d, *gr = dy + r * d;
      const T mu = mean[r], rs = rstd[r];
      T mean_g = 0, mean_gx = 0;
#pragma omp simd reduction(+ : mean_g, mean_gx)
      for (int64_t i = 0; i < d; ++i) {
        T gh = gain ? gain[i] * gr[i] : gr[i];
        mean_g += gh;
        mean_gx += gh * (xr[i] - mu) * rs;
      }
      mean_g /= static_cast<T>(d);
      mean_gx /= static_cast<T>(d);
      T* dxr = dx + r * d;
      for (int64_t i = 0; i < d; ++i) {
        T gh = gain ? gain[i] * gr[i] : gr[i];
        dxr[i] += rs * (gh - mean_g - (xr[i] - mu) * rs * mean_gx);
      }
      if (sum) producer.backward_row(r, d);
    }
  }
  const bool want_gain = g.requires_grad(n.in[kGain]), want_bias = g.requires_grad(n.in[kBias]);
  if (!want_gain && !want_bias) return;
  // One reduction fills [Σ g⊙x̂ | Σ g] so x and g are read once; the halves are then added to the gradients.
  T* sums = reinterpret_cast<T*>(g.workspace() + reduce_rows_workspace<T>(d, 2));
  std::fill(sums, sums + 2 * d, T(0));
  reduce_rows<T>(rows, d, 2, sums, g.workspace(), [&](int64_t r, T* acc) {
    const T *xr = x + r * d, *gr = dy + r * d;
    for (int64_t i = 0; i < d; ++i) {
      acc[i] += gr[i] * (xr[i] - mean[r]) * rstd[r];
      acc[d + i] += gr[i];
    }
  });
  if (want_gain) {
    T* dgain = g.grad<T>(n.in[kGain]);
    for (int64_t i = 0; i < d; ++i) dgain[i] += sums[i];
  }
  if (want_bias) {
    T* dbias = g.grad<T>(n.in[kBias]);
    for (int64_t i = 0; i < d; ++i) dbias[i] += sums[d + i];
  }
}

NORMLAB_FUSABLE_NORM_OP(layer_norm)

}  // namespace

extern const OpKernels layer_norm_kernels{layer_norm_forward, layer_norm_backward};
extern const OpKernels add_layer_norm_kernels{layer_norm_fused_forward, layer_norm_fused_backward};

void set_norm_sampling(Node& norm, int64_t stride) {
  if (norm.op != OpKind::layer_norm && norm.op != OpKind::rms_norm)
    fail("internal: set_norm_sampling on another op's node");
  norm.attr.i[kNormSamplingSlot] = stride;
}

TensorId layer_norm(Graph& g, const std::string& name, TensorId x, TensorId gain, TensorId bias, double eps) {
  Node n = make_node(OpKind::layer_norm, x, gain, bias);
  n.out = like(g, name, x, {x, gain, bias});
  const Shape& s = g.shape(x);
  n.saved = {g.activation(name + ".mean", Shape{s.rows()}, false),
             g.activation(name + ".rstd", Shape{s.rows()}, false)};
  n.attr.f[0] = eps;
  n.workspace_bytes = reduce_rows_workspace<double>(s.last(), 2) + 2 * static_cast<size_t>(s.last()) * sizeof(double);
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
