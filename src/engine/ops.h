#pragma once
// The op table: every operation the engine knows, each with its forward and backward written side by
// side in ops/ (one file per op family: the norms of one kind, the element-wise ops, ...) and the
// derivative derived in a comment above the kernels. Builders append
// a node to the graph and return its output; kernels run later, when the graph replays the tape.
//
// Conventions: activations are [rows, width] with every leading axis folded into rows; backward
// kernels ACCUMULATE (+=) into the gradients of their inputs, so a tensor read by several nodes
// (the residual stream) collects the sum. Gradients are only written where requires_grad holds.
#include <string>

#include "common/error.h"
#include "engine/graph.h"

namespace normlab::engine {

// The list of ops, one line each: the enum, the names and the table are generated from it, so a
// kind without kernels fails to link and no row can sit in the wrong place. (Not clang-formatted: it
// aligns the backslashes by bytes, not by the columns the symbols take.)
// clang-format off
#define NORMLAB_OPS(X)                                                                      \
  X(embedding)     /* out[r] = table[ids[r]]                                           */ \
  X(position_add)  /* out[b,t] = x[b,t] + pos[t]                                       */ \
  X(sinusoid_add)  /* out[b,t] = x[b,t] + PE[t], Vaswani et al.'s sines and cosines    */ \
  X(linear)        /* y = x Wᵀ + b                                                     */ \
  X(layer_norm)    /* y = γ ⊙ (x − μ)/√(v + ε) + β                                     */ \
  X(rms_norm)      /* y = (γ + offset) ⊙ x/√(mean(x²) + ε)                             */ \
  X(add)           /* y = α·a + β·b                                                    */ \
  X(scale)         /* y = c·x                                                          */ \
  X(gelu)          /* y = x·Φ(x)                                                       */ \
  X(gelu_tanh)     /* y = ½x(1 + tanh(√(2/π)(x + 0.044715x³)))                         */ \
  X(relu)          /* y = max(x, 0)                                                    */ \
  X(gated)         /* y = act(gate) ⊙ up, act = SiLU (SwiGLU) or a GELU (GeGLU)        */ \
  X(rope)          /* rotary positions on q or k                                       */ \
  X(attention)     /* multi-head softmax attention, causal or bidirectional            */ \
  X(cached_attention) /* causal attention of new positions over a key-value cache     */ \
  X(cross_entropy) /* mean −log softmax(logits)[target] over targets ≥ 0               */ \
  X(dropout)       /* inverted dropout, mask from a counter-based hash                 */ \
  X(scale_add)     /* y = a + s ⊙ b, s a learnable scalar, vector or per-head vector   */ \
  X(gpas)          /* y = x − SiLU(a)·sg(x)                                            */ \
  X(dyt)           /* y = γ ⊙ tanh(α x) + β                                            */ \
  X(scale_norm)    /* y = g · x / max(‖x‖₂, ε)   (g absent: plain L2 normalization)    */ \
  X(crms_norm)     /* compressed RMSNorm of a zero-mean vector without its last coord. */ \
  X(center)        /* y = x − mean(x)                                                  */ \
  X(softcap)       /* y = c · tanh(x / c)                                              */ \
  X(pb_relax)      /* y = x / (max|x| / 8), max over the whole tensor and detached     */ \
  X(add_layer_norm) /* fused pairs, never built: Graph::plan pairs the nodes           */ \
  X(add_rms_norm)   /* (engine/fusion.h): add → layer_norm, add → rms_norm,            */ \
  X(add_crms_norm)  /* add → crms_norm,                                                */ \
  X(linear_gelu)    /* linear → gelu                                                   */

enum class OpKind : uint8_t {
#define NORMLAB_OP_KIND(name) name,
  NORMLAB_OPS(NORMLAB_OP_KIND)
#undef NORMLAB_OP_KIND
  count
};
// clang-format on

// What an op's file defines, as `extern const OpKernels <name>_kernels`.
struct OpKernels {
  void (*forward)(Graph&, const Node&);
  void (*backward)(Graph&, const Node&);
};

struct OpDef {
  OpKind kind;
  const char* name;
  OpKernels kernels;
};
const OpDef& op_def(OpKind kind);

// --- builders (name = the output tensor's name; probes and tests look tensors up by it) ---
TensorId embedding(Graph& g, const std::string& name, TensorId ids, TensorId table);
// offset (i32 [1], optional): the chunk x starts at that position (decoding with a key-value cache).
TensorId position_add(Graph& g, const std::string& name, TensorId x, TensorId positions, TensorId offset = kNoTensor);
// x [B, T, w] plus the fixed sinusoids of positions o..o + T − 1 (o = *offset, or 0); no parameters.
TensorId sinusoid_add(Graph& g, const std::string& name, TensorId x, TensorId offset = kNoTensor);
// centered: every output row minus its mean, folded into W and b (ops/linear.cpp; Pre-RMSNorm's efficient form).
TensorId linear(Graph& g, const std::string& name, TensorId x, TensorId weight, TensorId bias, bool centered = false);
TensorId layer_norm(Graph& g, const std::string& name, TensorId x, TensorId gain, TensorId bias, double eps);
TensorId rms_norm(Graph& g, const std::string& name, TensorId x, TensorId gain, double eps, double gain_offset = 0.0);
// An inference-time option of a built LayerNorm or RMSNorm node: its statistics from every stride-th feature (1 =
// all of them; such a node has no backward). The slot it lives in is the kernels' business.
inline constexpr size_t kNormSamplingSlot = 3;
void set_norm_sampling(Node& norm, int64_t stride);
TensorId add(Graph& g, const std::string& name, TensorId a, TensorId b, double alpha = 1.0, double beta = 1.0);
TensorId scale(Graph& g, const std::string& name, TensorId x, double c);
TensorId gelu(Graph& g, const std::string& name, TensorId x);
TensorId gelu_tanh(Graph& g, const std::string& name, TensorId x);
TensorId relu(Graph& g, const std::string& name, TensorId x);
TensorId swiglu(Graph& g, const std::string& name, TensorId gate, TensorId up);
TensorId geglu(Graph& g, const std::string& name, TensorId gate, TensorId up);
TensorId geglu_tanh(Graph& g, const std::string& name, TensorId gate, TensorId up);  // GELU's tanh form on the gate
TensorId rope(Graph& g, const std::string& name, TensorId x, int64_t heads, double base, TensorId offset = kNoTensor);
// scale multiplies q·k (0 = the usual 1/√D); softcap > 0 applies c·tanh(s/c) to the scaled logits; causal = false:
// every position attends to every position (an encoder); key_lengths (i32 [B], each in 1..T): batch row b attends
// only to its first key_lengths[b] keys (padding). k and v may have another length than q when not causal
// (cross-attention of a decoding step over the whole source).
TensorId attention(Graph& g, const std::string& name, TensorId q, TensorId k, TensorId v, int64_t heads,
                   double scale = 0, double softcap = 0, bool causal = true, TensorId key_lengths = kNoTensor);
// An inference-time option of a built attention node: each query keeps only its top_k largest scores (0 = all).
void set_attention_top_k(Node& attention, int64_t top_k);
// Every attention node of the unplanned graph stops saving its probabilities [B, H, T, T_k] and recomputes them
// in backward, in blocks of `block_rows` queries (causal blocks skip the keys after their last row); the saved
// tensor keeps its name with no storage (`engine.recompute_attention`; ops/attention.cpp).
void recompute_attention_probabilities(Graph& g, int64_t block_rows = 64);
// Decoding: causal attention of a chunk of new positions q, k, v [B, S, H·D] starting at position *position (i32 [1])
// over every earlier position's keys and values, kept in the node's caches [B, capacity, H·D] between calls (see
// ops/attention.cpp). Forward only.
TensorId cached_attention(Graph& g, const std::string& name, TensorId q, TensorId k, TensorId v, TensorId position,
                          int64_t heads, int64_t capacity, double scale = 0, double softcap = 0);
// smoothing ε: the target distribution is (1 − ε)·one-hot + ε/V (PyTorch's label_smoothing; Szegedy et al. 2016).
TensorId cross_entropy(Graph& g, const std::string& name, TensorId logits, TensorId targets, double smoothing = 0);
TensorId dropout(Graph& g, const std::string& name, TensorId x, double p);

enum class ScaleMode : int64_t { scalar, vector, heads };
// y = a + s ⊙ b. scalar: s = p[index] (p of any shape); vector: s = p (width of b); heads: s[j] = p[j / (w/H)].
// a may be kNoTensor (then y = s ⊙ b).
TensorId scale_add(Graph& g, const std::string& name, TensorId a, TensorId b, TensorId p, ScaleMode mode,
                   int64_t index = 0);
TensorId gpas(Graph& g, const std::string& name, TensorId x, TensorId gate);
TensorId dyt(Graph& g, const std::string& name, TensorId x, TensorId alpha, TensorId gain, TensorId bias);
TensorId scale_norm(Graph& g, const std::string& name, TensorId x, TensorId gain, double eps);
TensorId crms_norm(Graph& g, const std::string& name, TensorId x, double eps);
TensorId center(Graph& g, const std::string& name, TensorId x);
TensorId softcap(Graph& g, const std::string& name, TensorId x, double cap);
TensorId pb_relax(Graph& g, const std::string& name, TensorId x);

// Defines name_forward / name_backward, dispatching to name_forward_kernel<T> / name_backward_kernel<T>.
#define NORMLAB_FLOAT_OP(name)                                                              \
  void name##_forward(Graph& g, const Node& n) {                                            \
    dispatch_float(g.float_type(), [&]<typename T>() { name##_forward_kernel<T>(g, n); });  \
  }                                                                                         \
  void name##_backward(Graph& g, const Node& n) {                                           \
    dispatch_float(g.float_type(), [&]<typename T>() { name##_backward_kernel<T>(g, n); }); \
  }

// Shared by builders: a node of this op reading these inputs (unused slots stay kNoTensor).
inline Node make_node(OpKind op, TensorId a, TensorId b = kNoTensor, TensorId c = kNoTensor) {
  Node n;
  n.op = op;
  n.in = {a, b, c, kNoTensor};
  return n;
}
// Shared by builders: a new activation shaped like x that needs a gradient if any input does.
TensorId like(Graph& g, const std::string& name, TensorId x, std::initializer_list<TensorId> inputs);

}  // namespace normlab::engine
