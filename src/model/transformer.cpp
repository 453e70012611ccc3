#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "engine/ops.h"
#include "model/placement.h"

namespace normlab::model {

namespace eng = normlab::engine;
using eng::Role;
using eng::Shape;

namespace {

// A linear layer `name` [in → out] with the given role; bias per model.bias (or `bias`, when given). centered:
// zero-mean outputs, folded into the weights (engine/ops/linear.cpp).
TensorId dense(Graph& g, const ModelConfig& c, const std::string& name, TensorId x, int64_t out, Role role,
               std::optional<bool> bias = std::nullopt, bool centered = false) {
  const int64_t in = g.shape(x).last();
  TensorId w = g.parameter(name + ".weight", Shape{out, in}, role, true);
  TensorId b = bias.value_or(c.bias) ? g.parameter(name + ".bias", Shape{out}, Role::bias, false) : eng::kNoTensor;
  return eng::linear(g, name + ".out", x, w, b, centered);
}

// Norm applied per head: x [B,T,H·D] viewed as [B,T,H,D].
TensorId per_head_norm(const SubLayer& s, const std::string& slot, TensorId x) {
  Graph& g = s.graph();
  const Shape& shape = g.shape(x);
  const ModelConfig& c = s.config();
  TensorId heads = g.view(x, s.prefix() + "." + slot + ".in_heads", Shape{shape[0], shape[1], c.n_heads, c.head_dim()});
  return g.view(s.norm(slot, heads), s.prefix() + "." + slot + ".out_flat", shape);
}

// q/‖q‖ per head (QKNorm); the learnable logit scale is applied to q afterwards.
TensorId per_head_l2(const SubLayer& s, const std::string& name, TensorId x) {
  Graph& g = s.graph();
  const Shape& shape = g.shape(x);
  const ModelConfig& c = s.config();
  TensorId heads = g.view(x, s.prefix() + "." + name + ".in_heads", Shape{shape[0], shape[1], c.n_heads, c.head_dim()});
  TensorId unit = eng::scale_norm(g, s.prefix() + "." + name + ".l2", heads, eng::kNoTensor, 1e-12);
  return g.view(unit, s.prefix() + "." + name + ".l2_flat", shape);
}

// center: the branch's output must have zero mean per row (Pre-RMSNorm); folded into the output projection's
// weights unless something after it (a per-head output scale) would undo it.
TensorId attention_branch(const SubLayer& s, TensorId x, const BranchStyle& style, bool center) {
  Graph& g = s.graph();
  const ModelConfig& c = s.config();
  const std::string p = s.prefix();
  const int64_t d = c.d_model;
  const bool qkv_bias = c.bias || s.flag("qkv_bias");
  // Cross-attention: queries from the decoder's stream, keys and values from the encoder's output.
  const bool cross = s.kind() == Branch::cross;
  const TensorId kv_source = cross ? s.spec().memory : x;
  TensorId q = dense(g, c, p + ".q", x, d, Role::q, qkv_bias);
  TensorId k = dense(g, c, p + ".k", kv_source, d, Role::k, qkv_bias);
  TensorId v = dense(g, c, p + ".v", kv_source, d, Role::v, qkv_bias);
  const std::string qk = s.text("qk_norm");
  double logit_scale = 0;
  if (qk == "full") {
    q = s.norm("q_norm", q);
    k = s.norm("k_norm", k);
  } else if (qk == "per_head") {
    q = per_head_norm(s, "q_norm", q);
    k = per_head_norm(s, "k_norm", k);
  } else if (qk == "l2") {
    const double t = c.max_seq_len;
    const double init = s.number("qk_scale_init") > 0 ? s.number("qk_scale_init") : std::log2(std::max(t * t - t, 2.0));
    q = eng::scale_add(g, p + ".q_scaled", eng::kNoTensor, per_head_l2(s, "q", q), s.scalar("qk_scale", init),
                       eng::ScaleMode::scalar);
    k = per_head_l2(s, "k", k);
    logit_scale = 1.0;  // g replaces 1/√D
  }
  if (s.flag("v_norm")) v = per_head_norm(s, "v_norm", v);
  const TensorId position = s.spec().position;
  if (c.positions == Positions::rope && !cross) {  // query and key positions are of different sequences across
    q = eng::rope(g, p + ".q.rope", q, c.n_heads, c.rope_base, position);
    k = eng::rope(g, p + ".k.rope", k, c.n_heads, c.rope_base, position);
  }
  // The source's padding is masked wherever its positions are keys: the encoder's self-attention and cross-attention.
  const bool causal = s.spec().causal && !cross;
  const TensorId key_lengths = causal ? eng::kNoTensor : s.spec().key_lengths;
  const double softcap = s.number("attn_softcap");
  TensorId heads = causal && s.spec().cache_capacity > 0
                       ? eng::cached_attention(g, p + ".heads", q, k, v, position, c.n_heads, s.spec().cache_capacity,
                                               logit_scale, softcap)
                       : eng::attention(g, p + ".heads", q, k, v, c.n_heads, logit_scale, softcap, causal, key_lengths);
  auto head_scale = [&](TensorId t) {
    return eng::scale_add(g, p + ".head_scaled", eng::kNoTensor, t, s.vector("head_scale", c.n_heads, 1.0),
                          eng::ScaleMode::heads);
  };
  if (style.head_scale == HeadScale::paper) heads = head_scale(heads);
  if (style.inner_norm) heads = s.norm("inner_norm", heads);
  const bool fold = center && style.head_scale != HeadScale::fairseq;
  TensorId out = dense(g, c, p + ".o", heads, c.stream_width(), Role::o, std::nullopt, fold);
  if (style.head_scale == HeadScale::fairseq) out = head_scale(out);
  return center && !fold ? s.center(out, "centered") : out;
}

TensorId ffn_branch(const SubLayer& s, TensorId x, const BranchStyle& style, bool center) {
  Graph& g = s.graph();
  const ModelConfig& c = s.config();
  const std::string p = s.prefix();
  TensorId hidden;
  if (c.gated_ffn()) {
    TensorId gate = dense(g, c, p + ".gate", x, c.d_ff, Role::gate);
    TensorId up = dense(g, c, p + ".fc1", x, c.d_ff, Role::fc1);
    const auto unit = c.activation == Activation::swiglu  ? eng::swiglu
                      : c.activation == Activation::geglu ? eng::geglu
                                                          : eng::geglu_tanh;
    hidden = unit(g, p + ".act", gate, up);
  } else {
    const auto act = c.activation == Activation::gelu   ? eng::gelu
                     : c.activation == Activation::relu ? eng::relu
                                                        : eng::gelu_tanh;
    hidden = act(g, p + ".act", dense(g, c, p + ".fc1", x, c.d_ff, Role::fc1));
  }
  if (style.mid_norm) hidden = s.norm("mid_norm", hidden);
  return dense(g, c, p + ".fc2", hidden, c.stream_width(), Role::fc2, std::nullopt, center);
}

}  // namespace

TensorId SubLayer::branch(TensorId x, BranchStyle style) const {
  // Pre-RMSNorm keeps every branch output zero-mean. Without dropout (which would undo it) the centering folds into
  // the branch's last linear map, as in the paper's efficient form; with dropout it is a pass after the dropout.
  const bool zero_mean = placement_of(config_).zero_mean_branch, fold = zero_mean && config_.dropout == 0;
  TensorId y = branch_ == Branch::ffn ? ffn_branch(*this, x, style, fold) : attention_branch(*this, x, style, fold);
  if (config_.dropout > 0) y = eng::dropout(g_, prefix() + ".dropout", y, config_.dropout);
  if (zero_mean && !fold) y = center(y, "centered");
  if (landmarks_ && branch_ != Branch::cross) {
    landmarks_->branch_outputs.resize(static_cast<size_t>(config_.n_layers), {eng::kNoTensor, eng::kNoTensor});
    landmarks_->branch_outputs[static_cast<size_t>(layer_)][branch_ == Branch::attn ? 0 : 1] = y;
  }
  return y;
}

namespace {

// tokens → embedding (× scale) (+ learned or sinusoidal positions) (centered) (normed) (dropout). `stack` prefixes the
// names in an encoder-decoder ("encoder." / "decoder."): each side has its own positions, the token table is shared.
TensorId embed(Graph& g, const ModelConfig& c, const Placement& placement, TensorId tokens, TensorId table,
               const std::string& stack = "", TensorId first_position = eng::kNoTensor) {
  const std::string e = stack + "embed";
  TensorId h = eng::embedding(g, e + ".tokens.out", tokens, table);
  const double sqrt_d = std::sqrt(static_cast<double>(c.d_model));
  if (c.embed_scale == EmbedScale::sqrt_d) h = eng::scale(g, e + ".scaled", h, sqrt_d);
  if (c.embed_scale == EmbedScale::learned) {
    TensorId s = g.parameter(e + ".scale", Shape{1}, Role::scalar, false, sqrt_d);
    h = eng::scale_add(g, e + ".scaled", eng::kNoTensor, h, s, eng::ScaleMode::scalar);
  }
  if (c.positions == Positions::learned) {
    TensorId pos = g.parameter(e + ".positions.weight", Shape{c.max_seq_len, c.stream_width()}, Role::embedding, true);
    h = eng::position_add(g, e + ".out", h, pos, first_position);
  }
  if (c.positions == Positions::sinusoidal) h = eng::sinusoid_add(g, e + ".out", h, first_position);
  if (placement.zero_mean_branch) h = eng::center(g, e + ".centered", h);
  if (c.embed_norm) h = make_norm(g, c, stack + "embed_norm", h);
  if (c.dropout > 0) h = eng::dropout(g, e + ".dropout", h, c.dropout);
  return h;
}

// The norm after the last layer, where the model has one (`prefix`: the stack's, "decoder." in an encoder-decoder).
TensorId final_norm(Graph& g, const ModelConfig& c, const std::string& prefix, TensorId h) {
  if (!c.has_final_norm()) return h;
  const double alpha = option(c, "dyt_alpha_final").get<double>();
  return make_norm(g, c, prefix + "final_norm", h, NormSpec{.dyt_alpha = alpha > 0 ? alpha : -1});
}

// The layer loop of one stack (or the placement's own stack()), then its final norm.
TensorId run_stack(const Stack& stack, const Placement& placement, TensorId h, int skip_layer) {
  const ModelConfig& c = stack.config();
  if (placement.stack) {
    if (skip_layer >= 0)
      fail("placement '{}' combines layers itself; dropping a layer is not defined for it", c.placement);
    h = placement.stack(stack, h);
  } else {
    for (int layer = 0; layer < stack.layers(); ++layer) {
      stack.mark_stream(layer, h);
      if (layer == skip_layer) continue;
      for (Branch b : stack.spec().branches()) h = placement.sublayer(stack.sublayer(layer, b), h);
    }
  }
  stack.mark_stream(stack.layers(), h);
  return final_norm(stack.graph(), c, stack.spec().prefix(), h);
}

// The head (tied to the token embeddings `table`, or its own lm_head), the final soft-cap and the loss, after the
// final norm: the model's readout of its stream.
void add_readout(Model& m, TensorId table, TensorId h) {
  Graph& g = m.graph;
  const ModelConfig& c = m.config;
  TensorId head = c.tied_embeddings
                      ? table
                      : g.parameter("lm_head.weight", Shape{c.vocab_size, c.stream_width()}, Role::head, true);
  m.logits = eng::linear(g, "logits", h, head, eng::kNoTensor);
  const double cap = option(c, "final_softcap").get<double>();
  TensorId scored = cap > 0 ? eng::softcap(g, "logits.capped", m.logits, cap) : m.logits;
  m.loss = eng::cross_entropy(g, "loss", scored, m.targets, c.label_smoothing);
  if (cap > 0) m.logits = scored;
}

TensorId token_table(Graph& g, const ModelConfig& c) {
  return g.parameter("embed.tokens.weight", Shape{c.vocab_size, c.stream_width()}, Role::embedding, true);
}

// source_seq: an encoder-decoder's source length (seq, but for a decoding model's whole source beside its chunk).
std::unique_ptr<Model> build_graph(const ModelConfig& c, int batch, int seq, eng::DType dtype, int skip_layer,
                                   int cache_capacity, int source_seq) {
  validate(c, "model");
  if (c.vocab_size <= 0) fail("model.vocab_size is not set (it normally comes from the prepared token data)");
  if (std::max(seq, source_seq) > c.max_seq_len)
    fail("sequence length {} exceeds model.max_seq_len = {}", std::max(seq, source_seq), c.max_seq_len);
  const Placement& placement = placement_of(c);
  auto m = std::make_unique<Model>(c, batch, seq, dtype);
  m->source_seq = source_seq;
  Graph& g = m->graph;
  m->tokens = g.input("tokens", Shape{batch, seq}, eng::DType::i32);
  m->targets = g.input("targets", Shape{batch, seq}, eng::DType::i32);
  if (cache_capacity > 0) {
    m->cache_capacity = cache_capacity;
    m->position = g.input("position", Shape{1}, eng::DType::i32);
  }

  TensorId table = token_table(g, c);
  TensorId h;
  if (c.encoder_decoder()) {
    // The source, padded to seq: its lengths mask the padding wherever source positions are keys.
    m->source = g.input("source", Shape{batch, source_seq}, eng::DType::i32);
    m->source_lengths = g.input("source_lengths", Shape{batch}, eng::DType::i32);
    const StackSpec encoder{StackSpec::encoder, c.source_layers(), false, m->source_lengths};
    TensorId memory = run_stack(Stack(g, c, m->landmarks, encoder), placement,
                                embed(g, c, placement, m->source, table, "encoder."), -1);
    m->decoder_first_node = g.nodes().size();
    const StackSpec decoder{.kind = StackSpec::decoder,
                            .layers = c.n_layers,
                            .causal = true,
                            .key_lengths = m->source_lengths,
                            .memory = memory,
                            .cache_capacity = cache_capacity,
                            .position = m->position};
    h = run_stack(Stack(g, c, m->landmarks, decoder), placement,
                  embed(g, c, placement, m->tokens, table, "decoder.", m->position), skip_layer);
  } else {
    const StackSpec single{.kind = StackSpec::single,
                           .layers = c.n_layers,
                           .causal = !c.encoder(),
                           .cache_capacity = cache_capacity,
                           .position = m->position};
    h = run_stack(Stack(g, c, m->landmarks, single), placement,
                  embed(g, c, placement, m->tokens, table, "", m->position), skip_layer);
  }
  add_readout(*m, table, h);
  return m;
}

}  // namespace

std::unique_ptr<Model> build_model(const ModelConfig& c, int batch, int seq, eng::DType dtype, int skip_layer) {
  auto m = build_unplanned_model(c, batch, seq, dtype, skip_layer);
  m->graph.plan();
  m->reset_source();
  return m;
}

std::unique_ptr<Model> build_inference_model(const ModelConfig& c, int batch, int seq, eng::DType dtype, int skip_layer,
                                             const Model* weights_of) {
  auto m = build_unplanned_model(c, batch, seq, dtype, skip_layer);
  m->graph.set_gradients(false);
  if (weights_of) m->graph.share_parameters_of(weights_of->graph);
  m->graph.plan();
  m->reset_source();
  return m;
}

std::unique_ptr<Model> build_unplanned_model(const ModelConfig& c, int batch, int seq, eng::DType dtype,
                                             int skip_layer) {
  return build_graph(c, batch, seq, dtype, skip_layer, 0, seq);
}

std::unique_ptr<Model> build_readout_model(const ModelConfig& c, int batch, int seq, eng::DType dtype,
                                           const Model& weights_of) {
  if (c.encoder_decoder())
    fail(
        "the readout of a stream reads a decoder-only or encoder model's final norm and head; an encoder-decoder's "
        "decoder reads its source too: set model.shape to decoder or encoder");
  auto m = std::make_unique<Model>(c, batch, seq, dtype);
  Graph& g = m->graph;
  m->stream = g.input("stream", Shape{batch, seq, c.stream_width()}, dtype);
  m->targets = g.input("targets", Shape{batch, seq}, eng::DType::i32);
  // Only a tied head reads the token table; an untied model's readout leaves it out.
  const TensorId table = c.tied_embeddings ? token_table(g, c) : eng::kNoTensor;
  add_readout(*m, table, final_norm(g, c, "", m->stream));
  g.set_gradients(false);
  g.share_parameters_of(weights_of.graph);
  g.plan();
  return m;
}

std::unique_ptr<Model> build_decoding_model(const ModelConfig& c, int batch, int capacity, int chunk, eng::DType dtype,
                                            const Model* weights_of, const std::function<void(Model&)>& before_plan) {
  if (c.encoder()) fail("internal: an encoder (model.shape = encoder) does not decode token by token");
  if (capacity > c.max_seq_len)
    fail("a key-value cache of {} positions exceeds model.max_seq_len = {}", capacity, c.max_seq_len);
  auto m = build_graph(c, batch, chunk, dtype, -1, capacity, capacity);
  m->graph.set_gradients(false);
  if (weights_of) m->graph.share_parameters_of(weights_of->graph);
  if (before_plan) before_plan(*m);
  m->graph.plan();
  m->reset_source();
  return m;
}

std::pair<int, int> set_inference_options(Model& m, const InferenceOptions& options) {
  if (options.attn_top_k < 0) fail("the attention top-k must be ≥ 0 (0 keeps every key), got {}", options.attn_top_k);
  if (options.norm_sample < 1)
    fail("the norm statistics' sampling stride must be ≥ 1 (1 uses every feature), got {}", options.norm_sample);
  int attention = 0, norms = 0;
  for (eng::Node& n : m.graph.nodes_to_adjust()) {
    if (n.op == eng::OpKind::attention || n.op == eng::OpKind::cached_attention) {
      eng::set_attention_top_k(n, options.attn_top_k);
      ++attention;
    } else if (n.op == eng::OpKind::layer_norm || n.op == eng::OpKind::rms_norm) {
      eng::set_norm_sampling(n, options.norm_sample);
      ++norms;
    }
  }
  return {attention, norms};
}

void copy_parameters(const Model& from, Model& to) {
  for (TensorId id : to.graph.parameters()) {
    const eng::TensorSpec& dst = to.graph.spec(id);
    const eng::TensorSpec& src = from.graph.spec(from.graph.at(dst.name));
    if (src.shape != dst.shape || dst.dtype == eng::DType::bf16)
      fail("internal: parameter '{}' differs between models, or is bf16 in the copy", dst.name);
    if (src.dtype == dst.dtype) {
      std::memcpy(dst.data, src.data, dst.bytes());
      continue;
    }
    const int64_t n = dst.shape.numel();
    eng::dispatch_float(dst.dtype, [&]<typename To>() {
      To* d = static_cast<To*>(dst.data);
      if (src.dtype == eng::DType::bf16) {  // a weight a BF16 checkpoint left in bf16, widened exactly
        const auto* bits = static_cast<const uint16_t*>(src.data);
        for (int64_t i = 0; i < n; ++i) d[i] = static_cast<To>(eng::bf16_to_float(bits[i]));
        return;
      }
      eng::dispatch_float(src.dtype, [&]<typename From>() {
        const From* s = static_cast<const From*>(src.data);
        for (int64_t i = 0; i < n; ++i) d[i] = static_cast<To>(s[i]);
      });
    });
  }
}

void Model::set_batch(const int32_t* token_ids, const int32_t* target_ids) {
  const size_t n = static_cast<size_t>(batch) * static_cast<size_t>(seq);
  std::copy_n(token_ids, n, graph.data<int32_t>(tokens));
  std::copy_n(target_ids, n, graph.data<int32_t>(targets));
}

void Model::set_source(const int32_t* source_ids, const int32_t* lengths) {
  if (source == eng::kNoTensor) fail("internal: a {} model has no source", name(config.shape));
  for (int b = 0; b < batch; ++b)
    if (lengths[b] < 1 || lengths[b] > source_seq)
      fail("internal: source row {} has length {}; it must be in 1..{}", b, lengths[b], source_seq);
  std::copy_n(source_ids, static_cast<size_t>(batch) * static_cast<size_t>(source_seq), graph.data<int32_t>(source));
  std::copy_n(lengths, batch, graph.data<int32_t>(source_lengths));
}

void Model::set_position(int first) {
  if (position == eng::kNoTensor) fail("internal: set_position on a model without a key-value cache");
  if (first < 0 || first + seq > cache_capacity)
    fail("internal: positions {}..{} do not fit a key-value cache of {}", first, first + seq - 1, cache_capacity);
  *graph.data<int32_t>(position) = first;
}

void Model::encode() {
  if (source == eng::kNoTensor) fail("internal: a {} model has no encoder", name(config.shape));
  graph.forward(false, 0, decoder_first_node);
}

void Model::step() {
  if (position == eng::kNoTensor) fail("internal: step() is for a decoding model (build_decoding_model)");
  graph.forward(false, decoder_first_node);
}

void Model::reorder_cache(std::span<const int> from) {
  if (static_cast<int>(from.size()) != batch) fail("internal: reorder_cache needs {} rows, got {}", batch, from.size());
  std::vector<std::byte> moved;
  for (const eng::Node& n : graph.nodes()) {
    if (n.op != eng::OpKind::cached_attention) continue;
    for (TensorId cache : n.saved) {
      const eng::TensorSpec& spec = graph.spec(cache);
      const size_t row = spec.bytes() / static_cast<size_t>(batch);
      moved.resize(spec.bytes());
      auto* data = static_cast<std::byte*>(spec.data);
      for (int b = 0; b < batch; ++b)
        std::memcpy(moved.data() + static_cast<size_t>(b) * row, data + static_cast<size_t>(from[b]) * row, row);
      std::memcpy(data, moved.data(), spec.bytes());
    }
  }
}

void Model::reset_source() {
  if (source == eng::kNoTensor) return;
  std::fill_n(graph.data<int32_t>(source_lengths), batch, source_seq);
}

double Model::loss_value() const {
  return graph.float_type() == eng::DType::f64 ? *graph.data<double>(loss) : *graph.data<float>(loss);
}

double Model::forward(bool training) {
  graph.forward(training);
  return loss_value();
}

}  // namespace normlab::model
