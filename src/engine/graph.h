#pragma once
// The computation graph: a static tape. A model is built once as a list of nodes (op + tensors);
// plan() lays out every parameter, activation, gradient and the shared scratch workspace in four
// arenas; each step then runs forward() over the nodes and backward() over them in reverse.
// Because the architecture does not change between steps, the tape is recorded once and replayed,
// and a step performs no heap allocation (as in llm.c, whose memory is planned up front).
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace normlab::engine {

enum class OpKind : uint8_t;
struct OpProfile;

// Attributes of one node; each op documents which slots it uses.
struct OpAttrs {
  std::array<double, 4> f{};
  std::array<int64_t, 4> i{};
};

struct Node {
  OpKind op{};
  std::array<TensorId, 4> in{kNoTensor, kNoTensor, kNoTensor, kNoTensor};
  TensorId out = kNoTensor;
  std::array<TensorId, 2> saved{kNoTensor, kNoTensor};  // statistics the backward pass needs
  OpAttrs attr;
  size_t workspace_bytes = 0;  // scratch shared by all nodes, valid during one forward/backward call
  int index = 0;               // position on the tape; also seeds dropout
  // Set by plan(): this node and the next run as the one kernel `fused_op` (its forward at this node, its
  // backward at the next). The tape keeps both nodes; see fusion.h.
  bool fused_with_next = false;
  OpKind fused_op{};
  // Set by plan() on a linear node that is the last on the tape to read its weight, so the first in backward to
  // write the weight's gradient: right after zero_param_grads() it stores ∂L/∂W instead of adding it to zeros.
  bool first_weight_grad_write = false;
};

// The bytes plan() allocates, per arena. A sum that would not fit in size_t saturates at SIZE_MAX.
struct ArenaSizes {
  size_t parameters = 0, parameter_grads = 0;  // the gradients: as much again, or none (set_gradients(false))
  size_t activations = 0, activation_grads = 0, workspace = 0;
  size_t widened = 0;  // fp32 copies of the bf16 parameters one kernel reads (store_as_bf16)
  // The parameters all in the float type (`parameters` when none is bf16), even where this graph shares another's:
  // what a copy of the model with weights of its own holds.
  size_t parameters_in_float_type = 0;
};

class Graph {
 public:
  explicit Graph(DType float_type = DType::f32) : float_type_(float_type) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  DType float_type() const { return float_type_; }

  // --- building ---
  TensorId parameter(const std::string& name, Shape shape, Role role, bool weight_decay, double init_value = 0);
  TensorId input(const std::string& name, Shape shape, DType dtype);
  TensorId activation(const std::string& name, Shape shape, bool requires_grad, DType dtype);
  TensorId activation(const std::string& name, Shape shape, bool requires_grad) {
    return activation(name, shape, requires_grad, float_type_);
  }
  // A reshape that shares storage and gradient storage with its base.
  TensorId view(TensorId base, const std::string& name, Shape shape);
  void record(Node node);
  // Assigns every tensor its place in the arenas and returns their sizes; allocates nothing, so a
  // memory estimate can call it on a graph too large to plan. plan() lays out, allocates, and pairs
  // adjacent nodes that have a fused kernel (unless set_fusion(false) came first: `engine.fuse`).
  ArenaSizes lay_out();
  void plan();
  bool planned() const { return planned_; }
  void set_fusion(bool on);
  // Before plan(): whether the graph gets gradient storage (on unless set off). An inference-only graph (eval,
  // generate, the analyses that read activations) holds its weights and activations alone, about half a trainable
  // one's memory; backward() and zero_param_grads() on it are refused.
  void set_gradients(bool on);
  bool has_gradients() const { return gradients_; }
  // Before plan(), on an inference-only fp32 graph: parameter `id` is stored as bfloat16, half the bytes (its values
  // are then written as bf16 bits, as a BF16 checkpoint holds them). Just before a node runs, each bf16 parameter it
  // reads is widened, exactly, into an fp32 staging buffer and the kernel reads that, so every kernel stays fp32 and
  // its results are those of the fp32 weights: a 7B model's BF16 checkpoint opens in 13.5 GB of weights, not 27.
  void store_as_bf16(TensorId id);
  // Before plan(), on an inference-only graph: every parameter takes the storage (and dtype) of the parameter of the
  // same name and shape in `owner`, which is planned and outlives this graph, instead of its own. A layer-drop, readout
  // or decoding copy of a model then costs its activations alone.
  void share_parameters_of(const Graph& owner);
  // Before plan(): an activation that no node needs any more (an op stopped saving it) gets no storage; its name
  // stays, with shape [0].
  void drop_activation(TensorId id);
  int fused_pairs() const;  // pairs running as one kernel (after plan)

  // --- running ---
  // Runs nodes [first_node, end_node) (all by default): a decoding model runs its encoder once and its decoder per
  // token.
  void forward(bool training, size_t first_node = 0, size_t end_node = SIZE_MAX);
  // Seeds d(loss) = loss_grad and accumulates every parameter gradient (+=), so gradient
  // accumulation over micro-batches is just several backward() calls between zero_param_grads().
  // after(i), when given, is called once node i's backward has run (every node, from the last to the first).
  void backward(TensorId loss, double loss_grad = 1.0, const std::function<void(size_t node)>& after = {});
  // Once backward() has run node i, the gradient of every parameter whose first use on the tape is at a node ≥ i
  // is final: final_gradients_from()[i] is the byte offset in gradient_block() from which every gradient is
  // final then (the block's size while none is). Data-parallel training sums that tail during the backward pass.
  std::vector<size_t> final_gradients_from() const;
  // Starts a fresh gradient: zeroes every parameter gradient except those of the weights whose first writer in
  // backward overwrites them (Node::first_weight_grad_write). That saves a pass over most of the gradient block
  // and each weight GEMM's read of C. Gradients are meant to be read after a backward(), not before.
  void zero_param_grads();
  // Whether node n's backward stores the weight gradient (the first write since zero_param_grads()) or adds to it.
  bool overwrites_weight_grad(const Node& n) const { return fresh_gradients_ && n.first_weight_grad_write; }
  void set_step(uint64_t step) { step_ = step; }  // dropout masks are a function of (seed, step, node)
  void set_seed(uint64_t seed) { seed_ = seed; }
  // This graph holds rows [first_row, first_row + rows) of a larger batch (a data-parallel rank's shard):
  // random masks are drawn for the rows' places in the whole batch, so the ranks together draw the
  // masks of one process.
  void set_batch_shard(int64_t first_row, int64_t rows) { shard_first_row_ = first_row, shard_rows_ = rows; }
  // The index in the whole batch of element 0 of a batch-major tensor of `numel` elements.
  int64_t shard_offset(int64_t numel) const { return shard_rows_ ? shard_first_row_ * (numel / shard_rows_) : 0; }
  // Times every node of the passes that follow into *profile (nullptr: stop timing).
  void set_profile(OpProfile* profile) { profile_ = profile; }
  uint64_t step() const { return step_; }
  uint64_t seed() const { return seed_; }
  bool training() const { return training_; }

  // --- access ---
  const TensorSpec& spec(TensorId id) const { return tensors_[static_cast<size_t>(id)]; }
  // By value: builders read a shape and then add tensors, and a reference into the tensor list would dangle as
  // soon as it grows (the sanitizer build found 63 such reads when this returned a reference).
  Shape shape(TensorId id) const { return spec(id).shape; }
  bool requires_grad(TensorId id) const { return id != kNoTensor && spec(id).requires_grad; }
  template <typename T>
  T* data(TensorId id) const {
    return static_cast<T*>(spec(id).data);
  }
  template <typename T>
  T* grad(TensorId id) const {
    return static_cast<T*>(spec(id).grad);
  }
  std::byte* workspace() const { return workspace_; }

  TensorId find(const std::string& name) const;  // kNoTensor if absent
  TensorId at(const std::string& name) const;    // throws normlab::Error if absent
  const std::vector<TensorId>& parameters() const { return parameters_; }
  // Every parameter's values, and their gradients, each as one block of float_type() elements (padding
  // between tensors included): data-parallel training sums the gradients and broadcasts the values in
  // one call each.
  std::span<std::byte> parameter_block() const { return {parameter_base_, parameter_bytes_}; }
  std::span<std::byte> gradient_block() const { return {gradient_base_, gradients_ ? parameter_bytes_ : 0}; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // The nodes, for changing attributes after the build (inference-time options); which tensors a node reads and
  // writes is fixed once the graph is planned.
  std::span<Node> nodes_to_adjust() { return nodes_; }
  size_t tensor_count() const { return tensors_.size(); }
  size_t parameter_count() const;  // scalars
  size_t arena_bytes() const {
    return param_arena_.size() + grad_arena_.size() + act_arena_.size() + act_grad_arena_.size();
  }

 private:
  TensorId add_tensor(TensorSpec spec);
  bool fuses_with_next(size_t i) const;  // a fusion rule pairs node i with node i + 1
  void pair_fused_nodes();
  size_t widened_bytes(const Node& n) const;
  // Widens the bf16 parameters node n (and its fused partner) reads into the staging buffer and points their specs at
  // the copies; restore_bf16 points them back at their storage.
  int widen_bf16_inputs(const Node& n, const Node* partner);
  void restore_bf16(int count);
  void mark_first_weight_grad_writes();
  std::vector<TensorId> parameters_by_gradient_offset() const;

  DType float_type_;
  std::vector<TensorSpec> tensors_;
  std::vector<Node> nodes_;
  std::vector<TensorId> parameters_;
  std::unordered_map<std::string, TensorId> by_name_;
  std::vector<std::byte> param_arena_, grad_arena_, act_arena_, act_grad_arena_, workspace_arena_, widened_arena_;
  std::byte* workspace_ = nullptr;
  std::byte* widened_ = nullptr;
  bool bf16_parameters_ = false;
  const Graph* parameter_owner_ = nullptr;                   // share_parameters_of
  std::array<std::pair<TensorId, void*>, 8> widened_now_{};  // (parameter, its bf16 storage) while a node runs
  bool planned_ = false;
  bool fusion_ = true;
  bool gradients_ = true;
  bool fresh_gradients_ = false;                             // zero_param_grads() has run and backward() not yet
  std::vector<std::pair<size_t, size_t>> zeroed_gradients_;  // (byte offset, bytes) zero_param_grads() clears
  bool training_ = false;
  uint64_t step_ = 0;
  uint64_t seed_ = 0;
  int64_t shard_first_row_ = 0, shard_rows_ = 0;
  std::byte *parameter_base_ = nullptr, *gradient_base_ = nullptr;
  size_t parameter_bytes_ = 0;
  OpProfile* profile_ = nullptr;
};

// A float tensor's values (or its gradient) as fp64: into dst, resized (reused buffers do not allocate),
// or as a new vector.
void copy_to_f64(const Graph& g, TensorId id, std::vector<double>& dst, bool grad = false);
std::vector<double> to_f64(const Graph& g, TensorId id, bool grad = false);

// Calls fn.template operator()<T>() with T = float or double, by the graph's float type.
template <typename Fn>
void dispatch_float(DType t, Fn&& fn) {
  if (t == DType::f64) fn.template operator()<double>();
  else fn.template operator()<float>();
}

}  // namespace normlab::engine
