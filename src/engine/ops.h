#pragma once
// The op table: every operation the engine knows, each with its forward and backward written side by
// side in ops/<name>.cpp and the derivative derived in a comment above the kernels. Builders append
// a node to the graph and return its output; kernels run later, when the graph replays the tape.
//
// Conventions: activations are [rows, width] with every leading axis folded into rows; backward
// kernels ACCUMULATE (+=) into the gradients of their inputs, so a tensor read by several nodes
// (the residual stream) collects the sum. Gradients are only written where requires_grad holds.
#include <string>

#include "common/error.h"
#include "engine/graph.h"

namespace normlab::engine {

enum class OpKind : uint8_t {
  embedding,      // out[r] = table[ids[r]]
  position_add,   // out[b,t] = x[b,t] + pos[t]
  linear,         // y = x Wᵀ + b
  layer_norm,     // y = γ ⊙ (x − μ)/√(v + ε) + β
  rms_norm,       // y = (γ + offset) ⊙ x/√(mean(x²) + ε)
  add,            // y = α·a + β·b
  scale,          // y = c·x
  gelu,           // y = x·Φ(x)
  swiglu,         // y = SiLU(gate) ⊙ up
  rope,           // rotary positions on q or k
  attention,      // causal multi-head softmax attention
  cross_entropy,  // mean −log softmax(logits)[target]
  dropout,        // inverted dropout, mask from a counter-based hash
  count
};

struct OpDef {
  const char* name;
  void (*forward)(Graph&, const Node&);
  void (*backward)(Graph&, const Node&);
};
const OpDef& op_def(OpKind kind);

// --- builders (name = the output tensor's name; probes and tests look tensors up by it) ---
TensorId embedding(Graph& g, const std::string& name, TensorId ids, TensorId table);
TensorId position_add(Graph& g, const std::string& name, TensorId x, TensorId positions);
TensorId linear(Graph& g, const std::string& name, TensorId x, TensorId weight, TensorId bias);
TensorId layer_norm(Graph& g, const std::string& name, TensorId x, TensorId gain, TensorId bias, double eps);
TensorId rms_norm(Graph& g, const std::string& name, TensorId x, TensorId gain, double eps, double gain_offset = 0.0);
TensorId add(Graph& g, const std::string& name, TensorId a, TensorId b, double alpha = 1.0, double beta = 1.0);
TensorId scale(Graph& g, const std::string& name, TensorId x, double c);
TensorId gelu(Graph& g, const std::string& name, TensorId x);
TensorId swiglu(Graph& g, const std::string& name, TensorId gate, TensorId up);
TensorId rope(Graph& g, const std::string& name, TensorId x, int64_t heads, double base);
TensorId attention(Graph& g, const std::string& name, TensorId q, TensorId k, TensorId v, int64_t heads);
TensorId cross_entropy(Graph& g, const std::string& name, TensorId logits, TensorId targets);
TensorId dropout(Graph& g, const std::string& name, TensorId x, double p);

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
