// Rotary position embedding (Su et al. 2021), GPT-NeoX / LLaMA "rotate half" form, on x [B, T, H·D].
// In each head, coordinate j < D/2 pairs with j + D/2 and the pair turns by the angle t·θ_j,
// θ_j = base^(−2j/D):
//
//   (a, b) ↦ (a cos − b sin,  b cos + a sin)
//
// A rotation is orthogonal, so the backward pass is the inverse rotation of the gradient:
//
//   ∂L/∂a = g_a cos + g_b sin,   ∂L/∂b = −g_a sin + g_b cos
//
// The cos/sin table [T, D/2] is rebuilt each forward (it is tiny) and kept for the backward pass. When decoding
// with a key-value cache, the chunk x starts at position o (the optional i32 [1] input) and t counts from o.
#include <cmath>

#include "engine/ops.h"

namespace normlab::engine {
namespace {

template <typename T>
void rotate(Graph& g, const Node& n, const T* in, T* out, T sign, bool accumulate) {
  const Shape& s = g.shape(n.out);
  const int64_t batch = s[0], time = s[1], width = s[2], heads = n.attr.i[0], dim = width / heads, half = dim / 2;
  const T* table = g.data<T>(n.saved[0]);  // [T, half, 2] = (cos, sin)
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < time; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = (b * time + t) * width + h * dim;
        for (int64_t j = 0; j < half; ++j) {
          const T c = table[(t * half + j) * 2], sn = sign * table[(t * half + j) * 2 + 1];
          const T a = in[base + j], bb = in[base + j + half];
          const T ra = a * c - bb * sn, rb = bb * c + a * sn;
          if (accumulate) {
            out[base + j] += ra;
            out[base + j + half] += rb;
          } else {
            out[base + j] = ra;
            out[base + j + half] = rb;
          }
        }
      }
}

template <typename T>
void forward_kernel(Graph& g, const Node& n) {
  const Shape& s = g.shape(n.out);
  const int64_t time = s[1], dim = s[2] / n.attr.i[0], half = dim / 2;
  const int64_t first = n.in[1] == kNoTensor ? 0 : *g.data<int32_t>(n.in[1]);
  T* table = g.data<T>(n.saved[0]);
  for (int64_t t = 0; t < time; ++t)
    for (int64_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(first + t) *
                           std::pow(n.attr.f[0], -2.0 * static_cast<double>(j) / static_cast<double>(dim));
      table[(t * half + j) * 2] = static_cast<T>(std::cos(angle));
      table[(t * half + j) * 2 + 1] = static_cast<T>(std::sin(angle));
    }
  rotate<T>(g, n, g.data<T>(n.in[0]), g.data<T>(n.out), T(1), false);
}

template <typename T>
void backward_kernel(Graph& g, const Node& n) {
  rotate<T>(g, n, g.grad<T>(n.out), g.grad<T>(n.in[0]), T(-1), true);
}

void forward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { forward_kernel<T>(g, n); });
}
void backward(Graph& g, const Node& n) {
  dispatch_float(g.float_type(), [&]<typename T>() { backward_kernel<T>(g, n); });
}

}  // namespace

extern const OpKernels rope_kernels{forward, backward};

TensorId rope(Graph& g, const std::string& name, TensorId x, int64_t heads, double base, TensorId offset) {
  const Shape& s = g.shape(x);
  if (s.rank != 3 || s[2] % heads != 0 || (s[2] / heads) % 2 != 0)
    fail("rope needs [B,T,H·D] with an even head size D; got {} with {} heads", s.str(), heads);
  Node n = make_node(OpKind::rope, x, offset);
  n.out = like(g, name, x, {x});
  n.saved[0] = g.activation(name + ".cos_sin", Shape{s[1], s[2] / heads / 2, 2}, false);
  n.attr.i[0] = heads;
  n.attr.f[0] = base;
  g.record(n);
  return n.out;
}

}  // namespace normlab::engine
