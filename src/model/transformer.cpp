#include "model/transformer.h"

#include <algorithm>
#include <cmath>

#include "engine/ops.h"
#include "model/placement.h"

namespace normlab::model {

namespace eng = normlab::engine;
using eng::Role;
using eng::Shape;

SubLayer::SubLayer(Graph& g, const ModelConfig& config, int layer, Branch branch)
    : g_(g), config_(config), layer_(layer), branch_(branch) {}

std::string SubLayer::prefix() const {
  return fmt::format("layers.{}.{}", layer_, branch_ == Branch::attn ? "attn" : "ffn");
}

// The configured norm over the last axis of x, parameters named `prefix.slot.{weight,bias}`.
TensorId make_norm(Graph& g, const NormConfig& norm, const std::string& name, TensorId x) {
  const int64_t width = g.shape(x).last();
  TensorId gain = g.parameter(name + ".weight", Shape{width}, Role::norm_gain, false);
  if (norm.type == "rmsnorm") return eng::rms_norm(g, name + ".out", x, gain, norm.eps);
  TensorId bias = norm.bias ? g.parameter(name + ".bias", Shape{width}, Role::norm_bias, false) : eng::kNoTensor;
  return eng::layer_norm(g, name + ".out", x, gain, bias, norm.eps);
}

TensorId SubLayer::norm(const std::string& slot, TensorId x) const {
  return make_norm(g_, config_.norm, prefix() + "." + slot, x);
}

TensorId SubLayer::add(TensorId a, TensorId b, double alpha, double beta, const std::string& name) const {
  return eng::add(g_, prefix() + "." + name, a, b, alpha, beta);
}

TensorId SubLayer::scale(TensorId x, double c, const std::string& name) const {
  return eng::scale(g_, prefix() + "." + name, x, c);
}

namespace {

// A linear layer `prefix.name` [in → out] with the given role; bias per model.bias.
TensorId dense(Graph& g, const ModelConfig& c, const std::string& name, TensorId x, int64_t out, Role role) {
  const int64_t in = g.shape(x).last();
  TensorId w = g.parameter(name + ".weight", Shape{out, in}, role, true);
  TensorId b = c.bias ? g.parameter(name + ".bias", Shape{out}, Role::bias, false) : eng::kNoTensor;
  return eng::linear(g, name + ".out", x, w, b);
}

TensorId attention_branch(Graph& g, const ModelConfig& c, const std::string& p, TensorId x) {
  const int64_t d = c.d_model;
  TensorId q = dense(g, c, p + ".q", x, d, Role::q);
  TensorId k = dense(g, c, p + ".k", x, d, Role::k);
  TensorId v = dense(g, c, p + ".v", x, d, Role::v);
  if (c.positions == "rope") {
    q = eng::rope(g, p + ".q.rope", q, c.n_heads, c.rope_base);
    k = eng::rope(g, p + ".k.rope", k, c.n_heads, c.rope_base);
  }
  TensorId heads = eng::attention(g, p + ".heads", q, k, v, c.n_heads);
  return dense(g, c, p + ".o", heads, d, Role::o);
}

TensorId ffn_branch(Graph& g, const ModelConfig& c, const std::string& p, TensorId x) {
  TensorId hidden;
  if (c.activation == "swiglu") {
    TensorId gate = dense(g, c, p + ".gate", x, c.d_ff, Role::gate);
    TensorId up = dense(g, c, p + ".fc1", x, c.d_ff, Role::fc1);
    hidden = eng::swiglu(g, p + ".act", gate, up);
  } else {
    hidden = eng::gelu(g, p + ".act", dense(g, c, p + ".fc1", x, c.d_ff, Role::fc1));
  }
  return dense(g, c, p + ".fc2", hidden, c.d_model, Role::fc2);
}

}  // namespace

TensorId SubLayer::branch(TensorId x) const {
  TensorId y = branch_ == Branch::attn ? attention_branch(g_, config_, prefix(), x) : ffn_branch(g_, config_, prefix(), x);
  if (config_.dropout > 0) y = eng::dropout(g_, prefix() + ".dropout", y, config_.dropout);
  return y;
}

std::unique_ptr<Model> build_model(const ModelConfig& c, int batch, int seq, eng::DType dtype) {
  validate(c, "model");
  if (c.vocab_size <= 0) fail("model.vocab_size is not set (it normally comes from the prepared token data)");
  if (seq > c.max_seq_len) fail("sequence length {} exceeds model.max_seq_len = {}", seq, c.max_seq_len);
  const Placement& placement = find_placement(c.placement);
  auto m = std::make_unique<Model>(c, batch, seq, dtype);
  Graph& g = m->graph;
  m->tokens = g.input("tokens", Shape{batch, seq}, eng::DType::i32);
  m->targets = g.input("targets", Shape{batch, seq}, eng::DType::i32);

  TensorId table = g.parameter("embed.tokens.weight", Shape{c.vocab_size, c.d_model}, Role::embedding, true);
  TensorId h = eng::embedding(g, "embed.tokens.out", m->tokens, table);
  if (c.positions == "learned") {
    TensorId pos = g.parameter("embed.positions.weight", Shape{c.max_seq_len, c.d_model}, Role::embedding, true);
    h = eng::position_add(g, "embed.out", h, pos);
  }
  if (c.dropout > 0) h = eng::dropout(g, "embed.dropout", h, c.dropout);

  for (int layer = 0; layer < c.n_layers; ++layer)
    for (Branch b : {Branch::attn, Branch::ffn}) h = placement.sublayer(SubLayer(g, c, layer, b), h);

  if (c.has_final_norm()) h = make_norm(g, c.norm, "final_norm", h);
  TensorId head = c.tied_embeddings ? table : g.parameter("lm_head.weight", Shape{c.vocab_size, c.d_model}, Role::head, true);
  m->logits = eng::linear(g, "logits", h, head, eng::kNoTensor);
  m->loss = eng::cross_entropy(g, "loss", m->logits, m->targets);
  g.plan();
  return m;
}

void Model::set_batch(const int32_t* token_ids, const int32_t* target_ids) {
  const size_t n = static_cast<size_t>(batch) * static_cast<size_t>(seq);
  std::copy_n(token_ids, n, graph.data<int32_t>(tokens));
  std::copy_n(target_ids, n, graph.data<int32_t>(targets));
}

double Model::loss_value() const {
  return graph.float_type() == eng::DType::f64 ? *graph.data<double>(loss) : *graph.data<float>(loss);
}

double Model::forward(bool training) {
  graph.forward(training);
  return loss_value();
}

}  // namespace normlab::model
