#pragma once
// Fused pairs. Graph::plan pairs two adjacent nodes of the tape when one kernel can run both (the rules are a
// table in graph.cpp): the pair's forward runs at the first node and its backward at the second. Exact, not
// approximate: nothing runs between the two nodes, and every other reader of the first node's output comes
// later on the tape, so when the pair's backward runs, that output's gradient already holds every other
// contribution. The tape is unchanged: both nodes, both outputs, their full gradients and the saved
// statistics stay where probes and tests look for them. `engine.fuse = false` (Graph::set_fusion) runs every
// node on its own, and the tests compare the two paths bit for bit. The pairs:
//
//   add_layer_norm, add_rms_norm, add_crms_norm: the residual add and the norm that reads it, Post-LN's
//     Norm(x + F(x)) and Pre-LN's stream h + F(…) that the next sub-layer opens with Norm(h). The norm's kernel,
//     given the add node, forms each row of the sum just before normalizing it and in backward hands each
//     finished row of the sum's gradient on to the add's inputs (FusedSum below):
//
//       forward:  s = α·a + β·b  (row r, then)  y = Norm(s)
//       backward: ∂L/∂s += (∂Norm/∂s)ᵀ ∂L/∂y  (row r, then)  ∂L/∂a += α·∂L/∂s,  ∂L/∂b += β·∂L/∂s
//
//   linear_gelu: the FFN's first linear map and its GELU (ops/linear.cpp): the bias and the GELU are applied
//     to each row of the GEMM's output together, and backward forms ∂L/∂(xWᵀ + b) and the bias gradient's
//     row sums in one pass.
//
// Each saves a pass over the activations each way (the sum or the pre-activation is read back from cache,
// not memory) and a parallel region.
#include "engine/graph.h"

namespace normlab::engine {

// The second node of the pair that `first` opens (the next node on the tape).
inline const Node& fused_partner(const Graph& g, const Node& first) {
  return g.nodes()[static_cast<size_t>(first.index) + 1];
}

// A norm that runs alone or fused with the residual add before it: from its kernels name_forward_kernel<T>(g, norm,
// add) and name_backward_kernel<T>(g, norm, add), where add is null when it runs alone, the four entry points of its
// two op-table rows: name_forward / name_backward (the norm's node) and name_fused_forward / name_fused_backward
// (called with the add node; the norm is the node after it).
#define NORMLAB_FUSABLE_NORM_OP(name)                                                                                 \
  void name##_forward(Graph& g, const Node& n) {                                                                      \
    dispatch_float(g.float_type(), [&]<typename T>() { name##_forward_kernel<T>(g, n, nullptr); });                   \
  }                                                                                                                   \
  void name##_backward(Graph& g, const Node& n) {                                                                     \
    dispatch_float(g.float_type(), [&]<typename T>() { name##_backward_kernel<T>(g, n, nullptr); });                  \
  }                                                                                                                   \
  void name##_fused_forward(Graph& g, const Node& add) {                                                              \
    dispatch_float(g.float_type(), [&]<typename T>() { name##_forward_kernel<T>(g, fused_partner(g, add), &add); });  \
  }                                                                                                                   \
  void name##_fused_backward(Graph& g, const Node& add) {                                                             \
    dispatch_float(g.float_type(), [&]<typename T>() { name##_backward_kernel<T>(g, fused_partner(g, add), &add); }); \
  }

// The add's side of a fused pair, row by row; a norm kernel given no add node never calls it.
template <typename T>
class FusedSum {
 public:
  FusedSum(const Graph& g, const Node* add) {
    if (!add) return;
    alpha_ = static_cast<T>(add->attr.f[0]), beta_ = static_cast<T>(add->attr.f[1]);
    a_ = g.data<T>(add->in[0]), b_ = g.data<T>(add->in[1]), s_ = g.data<T>(add->out);
    ds_ = g.grad<T>(add->out);
    da_ = g.requires_grad(add->in[0]) ? g.grad<T>(add->in[0]) : nullptr;
    db_ = g.requires_grad(add->in[1]) ? g.grad<T>(add->in[1]) : nullptr;
  }
  void forward_row(int64_t r, int64_t d) const {
    const T *ar = a_ + r * d, *br = b_ + r * d;
    T* sr = s_ + r * d;
    for (int64_t i = 0; i < d; ++i) sr[i] = alpha_ * ar[i] + beta_ * br[i];
  }
  void backward_row(int64_t r, int64_t d) const {
    const T* dsr = ds_ + r * d;
    if (da_)
      for (int64_t i = 0; i < d; ++i) da_[r * d + i] += alpha_ * dsr[i];
    if (db_)
      for (int64_t i = 0; i < d; ++i) db_[r * d + i] += beta_ * dsr[i];
  }

 private:
  T alpha_ = 1, beta_ = 1;
  const T *a_ = nullptr, *b_ = nullptr, *ds_ = nullptr;
  T *s_ = nullptr, *da_ = nullptr, *db_ = nullptr;
};

}  // namespace normlab::engine
