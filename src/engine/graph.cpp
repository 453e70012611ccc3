#include "engine/graph.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace normlab::engine {

namespace {
constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// a + b, or SIZE_MAX when that does not fit (a graph far too large to allocate is still laid out).
size_t saturating_add(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }

// std::vector<std::byte> storage aligned to kAlign by over-allocating and offsetting.
std::byte* aligned_base(std::vector<std::byte>& arena, size_t bytes) {
  arena.assign(bytes + kAlign, std::byte{0});
  auto addr = reinterpret_cast<uintptr_t>(arena.data());
  return arena.data() + (align_up(addr) - addr);
}

// Runs one kernel of kind `kind` on node n, adding its wall time and a call to the profile's row of that kind.
template <typename Kernel>
void run_timed(Kernel kernel, OpKind kind, Graph& g, const Node& n, std::array<double, OpProfile::kKinds>& seconds,
               std::array<int64_t, OpProfile::kKinds>& calls) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  kernel(g, n);
  const auto k = static_cast<size_t>(kind);
  seconds[k] += std::chrono::duration<double>(Clock::now() - start).count();
  ++calls[k];
}

// Adjacent nodes (first, then second reading first's output as its input 0) that one kernel runs (fusion.h).
struct FusionRule {
  OpKind first, second, fused;
};
constexpr FusionRule kFusionRules[] = {
    {OpKind::add, OpKind::layer_norm, OpKind::add_layer_norm},
    {OpKind::add, OpKind::rms_norm, OpKind::add_rms_norm},
    {OpKind::add, OpKind::crms_norm, OpKind::add_crms_norm},
    {OpKind::linear, OpKind::gelu, OpKind::linear_gelu},
};
}  // namespace

TensorId Graph::add_tensor(TensorSpec spec) {
  if (planned_) fail("internal: tensor '{}' added after the graph was planned", spec.name);
  if (by_name_.contains(spec.name)) fail("internal: tensor name '{}' used twice", spec.name);
  auto id = static_cast<TensorId>(tensors_.size());
  by_name_.emplace(spec.name, id);
  tensors_.push_back(std::move(spec));
  return id;
}

TensorId Graph::parameter(const std::string& name, Shape shape, Role role, bool weight_decay, double init_value) {
  TensorSpec s;
  s.name = name;
  s.shape = shape;
  s.dtype = float_type_;
  s.kind = TensorKind::parameter;
  s.role = role;
  s.requires_grad = true;
  s.weight_decay = weight_decay;
  s.init_value = init_value;
  TensorId id = add_tensor(std::move(s));
  parameters_.push_back(id);
  return id;
}

TensorId Graph::input(const std::string& name, Shape shape, DType dtype) {
  TensorSpec s;
  s.name = name;
  s.shape = shape;
  s.dtype = dtype;
  s.kind = TensorKind::input;
  return add_tensor(std::move(s));
}

TensorId Graph::activation(const std::string& name, Shape shape, bool requires_grad, DType dtype) {
  TensorSpec s;
  s.name = name;
  s.shape = shape;
  s.dtype = dtype;
  s.requires_grad = requires_grad;
  return add_tensor(std::move(s));
}

TensorId Graph::view(TensorId base, const std::string& name, Shape shape) {
  const TensorSpec& b = spec(base);
  if (shape.numel() != b.shape.numel())
    fail("internal: view '{}' {} does not match the size of '{}' {}", name, shape.str(), b.name, b.shape.str());
  TensorSpec s;
  s.name = name;
  s.shape = shape;
  s.dtype = b.dtype;
  s.kind = TensorKind::view;
  s.requires_grad = b.requires_grad;
  s.view_of = b.view_of == kNoTensor ? base : b.view_of;
  return add_tensor(std::move(s));
}

void Graph::record(Node node) {
  if (planned_) fail("internal: node recorded after the graph was planned");
  node.index = static_cast<int>(nodes_.size());
  nodes_.push_back(node);
}

ArenaSizes Graph::lay_out() {
  ArenaSizes sizes;
  for (TensorSpec& t : tensors_) {
    if (t.kind == TensorKind::view) continue;
    const size_t bytes = t.bytes();
    const size_t n = bytes > SIZE_MAX - kAlign ? SIZE_MAX : align_up(bytes);
    if (t.kind == TensorKind::parameter) {
      // A gradient is in the float type, whatever the storage (a bf16 graph with gradients is refused by plan()).
      const size_t in_float_type = align_up(static_cast<size_t>(t.shape.numel()) * dtype_size(float_type_));
      sizes.parameters_in_float_type = saturating_add(sizes.parameters_in_float_type, in_float_type);
      if (parameter_owner_) continue;  // the owner's storage
      t.offset = t.grad_offset = sizes.parameters;
      sizes.parameters = saturating_add(sizes.parameters, n);
      if (gradients_) sizes.parameter_grads = saturating_add(sizes.parameter_grads, in_float_type);
    } else {
      t.offset = sizes.activations;
      sizes.activations = saturating_add(sizes.activations, n);
      if (t.requires_grad && gradients_) {
        t.grad_offset = sizes.activation_grads;
        sizes.activation_grads = saturating_add(sizes.activation_grads, n);
      }
    }
  }
  for (const Node& n : nodes_) sizes.workspace = std::max(sizes.workspace, n.workspace_bytes);
  if (bf16_parameters_)
    for (size_t i = 0; i < nodes_.size(); ++i) {
      size_t bytes = widened_bytes(nodes_[i]);
      if (fusion_ && fuses_with_next(i)) bytes += widened_bytes(nodes_[++i]);
      sizes.widened = std::max(sizes.widened, bytes);
    }
  return sizes;
}

void Graph::plan() {
  // Kernels call oneDNN's GEMM from inside their own parallel loops (attention, per head); a nested
  // team there would put 4 spinning threads on 2 cores, so nesting is switched off.
  omp_set_max_active_levels(1);
  if (gradients_ && (bf16_parameters_ || parameter_owner_))
    fail("internal: a graph with gradients keeps its own parameters in its float type (bf16 or shared storage asked)");
  const ArenaSizes sizes = lay_out();
  std::byte* params = aligned_base(param_arena_, sizes.parameters);
  std::byte* grads = aligned_base(grad_arena_, sizes.parameter_grads);
  std::byte* acts = aligned_base(act_arena_, sizes.activations);
  std::byte* act_grads = aligned_base(act_grad_arena_, sizes.activation_grads);
  workspace_ = aligned_base(workspace_arena_, sizes.workspace);
  widened_ = aligned_base(widened_arena_, sizes.widened);
  parameter_base_ = params, gradient_base_ = gradients_ ? grads : nullptr, parameter_bytes_ = sizes.parameters;
  for (TensorSpec& t : tensors_) {
    if (t.kind == TensorKind::view) continue;
    bool is_param = t.kind == TensorKind::parameter;
    if (is_param && parameter_owner_) {
      t.data = parameter_owner_->spec(parameter_owner_->at(t.name)).data;
      continue;
    }
    t.data = (is_param ? params : acts) + t.offset;
    if (t.requires_grad && gradients_) t.grad = (is_param ? grads : act_grads) + t.grad_offset;
  }
  for (TensorSpec& t : tensors_) {
    if (t.kind != TensorKind::view) continue;
    t.data = tensors_[static_cast<size_t>(t.view_of)].data;
    t.grad = tensors_[static_cast<size_t>(t.view_of)].grad;
  }
  if (fusion_) pair_fused_nodes();
  if (gradients_) mark_first_weight_grad_writes();
  planned_ = true;
}

std::vector<TensorId> Graph::parameters_by_gradient_offset() const {
  std::vector<TensorId> by_offset = parameters_;
  std::sort(by_offset.begin(), by_offset.end(),
            [&](TensorId a, TensorId b) { return spec(a).grad_offset < spec(b).grad_offset; });
  return by_offset;
}

// Backward runs the tape in reverse, so the last node to read a parameter writes its gradient first. Where that
// node is a linear map reading it as its weight, the weight GEMM runs with beta = 0 after zero_param_grads(), and
// the weight is left out of the zeroing. A parameter read through a view is always zeroed: a view's reader may
// write only part of it. Every other parameter's gradient, and every later write, accumulates into zeros as before.
void Graph::mark_first_weight_grad_writes() {
  std::vector<size_t> last_reader(tensors_.size(), nodes_.size());
  std::vector<bool> viewed(tensors_.size(), false);
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (TensorId t : nodes_[i].in) {
      if (t == kNoTensor) continue;
      const TensorSpec& s = spec(t);
      const size_t base = static_cast<size_t>(s.view_of == kNoTensor ? t : s.view_of);
      if (s.kind == TensorKind::view) viewed[base] = true;
      last_reader[base] = i;
    }
  zeroed_gradients_.clear();
  for (TensorId p : parameters_by_gradient_offset()) {
    const size_t reader = last_reader[static_cast<size_t>(p)];
    if (reader < nodes_.size() && !viewed[static_cast<size_t>(p)]) {
      Node& n = nodes_[reader];
      if (n.op == OpKind::linear && n.in[1] == p && n.in[0] != p && n.in[2] != p) {
        n.first_weight_grad_write = true;
        continue;
      }
    }
    const TensorSpec& s = spec(p);
    const size_t end = std::min(s.grad_offset + align_up(s.bytes()), parameter_bytes_);
    if (!zeroed_gradients_.empty() && zeroed_gradients_.back().first + zeroed_gradients_.back().second == s.grad_offset)
      zeroed_gradients_.back().second = end - zeroed_gradients_.back().first;
    else zeroed_gradients_.emplace_back(s.grad_offset, end - s.grad_offset);
  }
}

void Graph::set_fusion(bool on) {
  if (planned_) fail("internal: set_fusion after the graph was planned");
  fusion_ = on;
}

void Graph::set_gradients(bool on) {
  if (planned_) fail("internal: set_gradients after the graph was planned");
  gradients_ = on;
}

void Graph::store_as_bf16(TensorId id) {
  if (planned_) fail("internal: store_as_bf16 after the graph was planned");
  TensorSpec& t = tensors_.at(static_cast<size_t>(id));
  if (t.kind != TensorKind::parameter || gradients_ || float_type_ != DType::f32 || parameter_owner_)
    fail("internal: '{}' cannot be stored as bf16: only a parameter of an inference-only fp32 graph may", t.name);
  for (const TensorSpec& v : tensors_)
    if (v.view_of == id) fail("internal: '{}' has a view, which would read its bf16 bits as fp32", t.name);
  t.dtype = DType::bf16;
  bf16_parameters_ = true;
}

void Graph::share_parameters_of(const Graph& owner) {
  if (planned_ || !owner.planned_)
    fail("internal: share_parameters_of needs this graph unplanned and its owner planned");
  if (gradients_) fail("internal: a graph with gradients cannot share another's parameters");
  for (TensorId id : parameters_) {
    TensorSpec& t = tensors_[static_cast<size_t>(id)];
    const TensorSpec& o = owner.spec(owner.at(t.name));
    if (o.kind != TensorKind::parameter || o.shape != t.shape || (o.dtype != t.dtype && o.dtype != DType::bf16))
      fail("internal: parameter '{}' differs between the two models", t.name);
    t.dtype = o.dtype;
    bf16_parameters_ = bf16_parameters_ || o.dtype == DType::bf16;
  }
  parameter_owner_ = &owner;
}

void Graph::drop_activation(TensorId id) {
  if (planned_) fail("internal: drop_activation after the graph was planned");
  TensorSpec& t = tensors_.at(static_cast<size_t>(id));
  if (t.kind != TensorKind::activation || t.requires_grad)
    fail("internal: {} is not an activation without a gradient; it cannot be dropped", t.name);
  t.shape = Shape{0};
}

// Both nodes must need gradients alike, so that backward runs or skips them together.
bool Graph::fuses_with_next(size_t i) const {
  if (i + 1 >= nodes_.size()) return false;
  const Node &first = nodes_[i], &second = nodes_[i + 1];
  if (second.in[0] != first.out || requires_grad(first.out) != requires_grad(second.out)) return false;
  for (const FusionRule& rule : kFusionRules)
    if (first.op == rule.first && second.op == rule.second) return true;
  return false;
}

void Graph::pair_fused_nodes() {
  for (size_t i = 0; i + 1 < nodes_.size(); ++i) {
    if (!fuses_with_next(i)) continue;
    Node& first = nodes_[i];
    for (const FusionRule& rule : kFusionRules)
      if (first.op == rule.first && nodes_[i + 1].op == rule.second) first.fused_op = rule.fused;
    first.fused_with_next = true;
    ++i;  // a node belongs to one pair at most
  }
}

size_t Graph::widened_bytes(const Node& n) const {
  size_t bytes = 0;
  for (size_t k = 0; k < n.in.size(); ++k) {
    const TensorId t = n.in[k];
    if (t == kNoTensor || spec(t).dtype != DType::bf16) continue;
    if (std::find(n.in.begin(), n.in.begin() + static_cast<std::ptrdiff_t>(k), t) !=
        n.in.begin() + static_cast<std::ptrdiff_t>(k))
      continue;  // read twice, widened once
    bytes += align_up(static_cast<size_t>(spec(t).shape.numel()) * sizeof(float));
  }
  return bytes;
}

int Graph::widen_bf16_inputs(const Node& n, const Node* partner) {
  int count = 0;
  std::byte* at = widened_;
  for (const Node* node : {&n, partner}) {
    if (!node) continue;
    for (TensorId t : node->in) {
      if (t == kNoTensor) continue;
      TensorSpec& s = tensors_[static_cast<size_t>(t)];
      if (s.dtype != DType::bf16) continue;  // an fp32 tensor, or one this node's reads widened already
      const int64_t numel = s.shape.numel();
      widen_bf16(static_cast<const uint16_t*>(s.data), reinterpret_cast<float*>(at), numel);
      widened_now_[static_cast<size_t>(count++)] = {t, s.data};
      s.data = at, s.dtype = DType::f32;
      at += align_up(static_cast<size_t>(numel) * sizeof(float));
    }
  }
  return count;
}

void Graph::restore_bf16(int count) {
  for (int k = 0; k < count; ++k) {
    const auto& [t, storage] = widened_now_[static_cast<size_t>(k)];
    tensors_[static_cast<size_t>(t)].data = storage;
    tensors_[static_cast<size_t>(t)].dtype = DType::bf16;
  }
}

int Graph::fused_pairs() const {
  int pairs = 0;
  for (const Node& n : nodes_) pairs += n.fused_with_next;
  return pairs;
}

void Graph::forward(bool training, size_t first_node, size_t end_node) {
  if (!planned_) plan();
  training_ = training;
  end_node = std::min(end_node, nodes_.size());
  if (first_node > 0 && first_node < nodes_.size() && nodes_[first_node - 1].fused_with_next)
    fail("internal: a forward pass cannot start at node {}, the second of a fused pair", first_node);
  for (size_t i = first_node; i < end_node; ++i) {
    const Node& n = nodes_[i];
    const OpKind kind = n.fused_with_next ? n.fused_op : n.op;
    const int widened = bf16_parameters_ ? widen_bf16_inputs(n, n.fused_with_next ? &nodes_[i + 1] : nullptr) : 0;
    if (profile_) run_timed(op_def(kind).kernels.forward, kind, *this, n, profile_->forward_s, profile_->forward_calls);
    else op_def(kind).kernels.forward(*this, n);
    restore_bf16(widened);
    i += n.fused_with_next;  // the pair's second node ran too
  }
}

void Graph::backward(TensorId loss, double loss_grad, const std::function<void(size_t)>& after) {
  if (!gradients_) fail("internal: backward on a graph planned without gradients (an inference-only model)");
  if (!requires_grad(loss))
    fail("internal: backward from '{}', which does not depend on any parameter", spec(loss).name);
  std::memset(act_grad_arena_.data(), 0, act_grad_arena_.size());
  dispatch_float(float_type_, [&]<typename T>() { *grad<T>(loss) = static_cast<T>(loss_grad); });
  for (size_t i = nodes_.size(); i-- > 0;) {
    if (requires_grad(nodes_[i].out)) {
      // A pair's backward runs at its second node, with the first node (which names the fused kernel).
      const bool pair = i > 0 && nodes_[i - 1].fused_with_next;
      const Node& n = pair ? nodes_[--i] : nodes_[i];
      const OpKind kind = pair ? n.fused_op : n.op;
      if (profile_)
        run_timed(op_def(kind).kernels.backward, kind, *this, n, profile_->backward_s, profile_->backward_calls);
      else op_def(kind).kernels.backward(*this, n);
    }
    if (after) after(i);
  }
  fresh_gradients_ = false;
}

std::vector<size_t> Graph::final_gradients_from() const {
  // The first node that reads each parameter (through a view too); a parameter no node reads is final at once.
  std::vector<size_t> first_use(tensors_.size(), nodes_.size());
  for (size_t i = nodes_.size(); i-- > 0;)
    for (TensorId t : nodes_[i].in)
      if (t != kNoTensor) first_use[static_cast<size_t>(spec(t).view_of == kNoTensor ? t : spec(t).view_of)] = i;
  const std::vector<TensorId> by_offset = parameters_by_gradient_offset();
  // earliest[k]: the earliest first use among the parameters at or after the k-th in the block.
  std::vector<size_t> earliest(by_offset.size() + 1, nodes_.size());
  for (size_t k = by_offset.size(); k-- > 0;)
    earliest[k] = std::min(earliest[k + 1], first_use[static_cast<size_t>(by_offset[k])]);
  std::vector<size_t> from(nodes_.size(), parameter_bytes_);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    // The first k whose tail has no parameter still to be written by a node before i (earliest is non-decreasing).
    const size_t k = static_cast<size_t>(std::lower_bound(earliest.begin(), earliest.end() - 1, i) - earliest.begin());
    if (k < by_offset.size()) from[i] = spec(by_offset[k]).grad_offset;  // gradient_block() starts at offset 0
  }
  return from;
}

void Graph::zero_param_grads() {
  if (!gradients_) fail("internal: zero_param_grads on a graph planned without gradients (an inference-only model)");
  for (const auto& [offset, bytes] : zeroed_gradients_) std::memset(gradient_base_ + offset, 0, bytes);
  fresh_gradients_ = true;
}

TensorId Graph::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoTensor : it->second;
}

TensorId Graph::at(const std::string& name) const {
  TensorId id = find(name);
  if (id == kNoTensor) fail("no tensor named '{}' in this model", name);
  return id;
}

size_t Graph::parameter_count() const {
  size_t n = 0;
  for (TensorId p : parameters_) n += static_cast<size_t>(spec(p).shape.numel());
  return n;
}

void copy_to_f64(const Graph& g, TensorId id, std::vector<double>& dst, bool grad) {
  const int64_t n = g.shape(id).numel();
  dst.resize(static_cast<size_t>(n));
  if (!grad && g.spec(id).dtype == DType::bf16) {
    const auto* bits = g.data<uint16_t>(id);
    for (int64_t i = 0; i < n; ++i) dst[static_cast<size_t>(i)] = bf16_to_float(bits[i]);
    return;
  }
  dispatch_float(g.float_type(), [&]<typename T>() {
    const T* d = grad ? g.grad<T>(id) : g.data<T>(id);
    for (int64_t i = 0; i < n; ++i) dst[static_cast<size_t>(i)] = static_cast<double>(d[i]);
  });
}

std::vector<double> to_f64(const Graph& g, TensorId id, bool grad) {
  std::vector<double> out;
  copy_to_f64(g, id, out, grad);
  return out;
}

}  // namespace normlab::engine
