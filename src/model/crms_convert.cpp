// Pre-LN → Pre-CRMSNorm conversion (Jiang et al. 2023, arXiv 2305.14858; spec §1.3).
//
// Derivation. Write the Pre-LN model's stream as z ∈ R^d (per token), C = I − 11ᵀ/d the centering
// projector, n(z) = Cz / √(‖Cz‖²/d + ε) the non-affine LayerNorm, and LN(z) = γ ⊙ n(z) (no β: the
// source has norm.bias = false).
//
// 1. Fold the gains. Every consumer of a norm output is a linear map W (q, k, v, fc1, gate after an
//    in_norm; the head after the final norm): W·LN(z) = (W·diag γ)·n(z). So W ← W·diag(γ) and the
//    norms become non-affine. Consumer biases are untouched (β = 0 adds nothing to them).
//
// 2. Re-center the producers. In Pre-LN the stream is read only by norms (every in_norm and the
//    final norm); the adds just carry it. n(z) = n(Cz), so replacing every vector written into the
//    stream by its centered version leaves every norm output, hence every logit, unchanged. The
//    writers are the token embedding rows, the position rows, and the sub-layer outputs o·h + b_o and
//    fc2·h + b_fc2: E ← E·C (each row minus its mean), P likewise, W ← C·W (each column minus its mean
//    over the output axis) and b ← C·b. The (now centered) stream z̄ has Σ z̄ = 0, where
//    n(z̄) = z̄/√(‖z̄‖²/d + ε) = RMSNorm(z̄): this is Pre-RMSNorm.
//
// 3. Compress the producers. A zero-sum z̄ is determined by x = z̄[0..d−2]: z̄[d−1] = −Σx. Drop the
//    last output row of o and fc2 (weights and biases) and the last column of E and P; the sums of
//    the compressed vectors are the compressed sums, so the stream is exactly x throughout.
//
// 4. Compress the consumers. CRMS(x) = x·r, r = ((‖x‖² + (Σx)²)/d + ε)^(−1/2), is the first d − 1
//    coordinates of n(z̄) = y, and y's last coordinate is −Σ_{j<d−1} y_j. A consumer W' (after step 1)
//    then computes W'y = Σ_{j<d−1} (W'[:, j] − W'[:, d−1])·y_j, i.e. W'' = W'[:, :d−1] − W'[:, d−1]·1ᵀ.
//
// In an encoder-decoder both stacks convert alike (each side's positions are producers), and cross-attention's k and
// v are consumers of the encoder's final norm, whose output is the memory.
//
// Everything between the norms and the producers (attention with RoPE and soft-caps, the FFN
// activation, the embedding scale) is untouched, so the converted model's logits equal the source's
// up to rounding. Tied embeddings cannot survive: the head becomes γ_f-folded and compressed by
// columns while the embedding is centered and compressed, so the source must be untied.
#include "model/crms_convert.h"

#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/placement.h"

namespace normlab::model {

namespace eng = normlab::engine;

namespace {

std::vector<double> read(const Model& m, const std::string& name) { return eng::to_f64(m.graph, m.graph.at(name)); }

class Writer {
 public:
  explicit Writer(Model& m) : m_(m) {}

  // Writes `values` into target parameter `name`, which must have exactly `shape`.
  void write(const std::string& name, eng::Shape shape, const std::vector<double>& values) {
    const eng::TensorId id = m_.graph.find(name);
    if (id == eng::kNoTensor)
      fail("convert_pre_ln_to_crms: the Pre-CRMSNorm model has no parameter '{}' (build it from crms_config_for())",
           name);
    if (m_.graph.shape(id) != shape)
      fail("convert_pre_ln_to_crms: '{}' is {} in the Pre-CRMSNorm model, the conversion gives {}", name,
           m_.graph.shape(id).str(), shape.str());
    eng::dispatch_float(m_.graph.float_type(), [&]<typename T>() {
      T* d = m_.graph.data<T>(id);
      for (size_t i = 0; i < values.size(); ++i) d[i] = static_cast<T>(values[i]);
    });
    written_.insert(name);
  }

  // Every parameter of the target must have been written exactly by the conversion.
  void finish() const {
    for (eng::TensorId id : m_.graph.parameters())
      if (!written_.contains(m_.graph.spec(id).name))
        fail("convert_pre_ln_to_crms: the Pre-CRMSNorm model has a parameter '{}' that the conversion does not fill",
             m_.graph.spec(id).name);
  }

 private:
  Model& m_;
  std::set<std::string> written_;
};

// A producer [d, in] (rows = output axis): centre each column over the rows, drop the last row → [d−1, in].
std::vector<double> compress_producer(const std::vector<double>& w, int64_t d, int64_t in) {
  std::vector<double> out(static_cast<size_t>((d - 1) * in));
  for (int64_t j = 0; j < in; ++j) {
    double mean = 0;
    for (int64_t i = 0; i < d; ++i) mean += w[static_cast<size_t>(i * in + j)];
    mean /= static_cast<double>(d);
    for (int64_t i = 0; i + 1 < d; ++i)
      out[static_cast<size_t>(i * in + j)] = w[static_cast<size_t>(i * in + j)] - mean;
  }
  return out;
}

// Rows of width d written into the stream (embedding tables): centre each row, drop the last column.
std::vector<double> compress_rows(const std::vector<double>& t, int64_t rows, int64_t d) {
  std::vector<double> out(static_cast<size_t>(rows * (d - 1)));
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0;
    for (int64_t j = 0; j < d; ++j) mean += t[static_cast<size_t>(r * d + j)];
    mean /= static_cast<double>(d);
    for (int64_t j = 0; j + 1 < d; ++j)
      out[static_cast<size_t>(r * (d - 1) + j)] = t[static_cast<size_t>(r * d + j)] - mean;
  }
  return out;
}

// A consumer [out, d] of a norm with gains γ [d]: W' = W·diag γ, then W'' = W'[:, :d−1] − W'[:, d−1]·1ᵀ.
std::vector<double> compress_consumer(const std::vector<double>& w, const std::vector<double>& gamma, int64_t out,
                                      int64_t d) {
  std::vector<double> res(static_cast<size_t>(out * (d - 1)));
  for (int64_t o = 0; o < out; ++o) {
    const double last = w[static_cast<size_t>(o * d + d - 1)] * gamma[static_cast<size_t>(d - 1)];
    for (int64_t j = 0; j + 1 < d; ++j)
      res[static_cast<size_t>(o * (d - 1) + j)] =
          w[static_cast<size_t>(o * d + j)] * gamma[static_cast<size_t>(j)] - last;
  }
  return res;
}

void require(bool ok, const char* what) {
  if (!ok) fail("convert_pre_ln_to_crms: the source model must have {} (spec §1.3)", what);
}

}  // namespace

ModelConfig crms_config_for(const ModelConfig& c) {
  require(placement_of(c).converts_to_crms, "a plain Pre-LN placement ('pre')");
  require(c.norm.type == "layernorm", "norm.type 'layernorm'");
  if (c.norm.bias)
    fail(
        "convert_pre_ln_to_crms: the source model has norm.bias = true; only bias-free LayerNorm converts exactly "
        "(LN's β would have to fold into consumer biases the head does not have): use norm.bias = false");
  if (c.tied_embeddings)
    fail(
        "convert_pre_ln_to_crms: the source model has tied_embeddings = true; the compressed head and the "
        "compressed embedding differ, so use tied_embeddings = false");
  require(c.has_final_norm(), "a final norm (final_norm = true)");
  require(!c.embed_norm, "embed_norm = false");
  // The compressed stream would need the sinusoids' compressed rows, which are no sinusoids of width d − 1.
  require(c.positions != Positions::sinusoidal, "positions 'learned' or 'rope'");
  require(option(c, "qk_norm").get<std::string>() == "none", "options.qk_norm = \"none\"");
  require(!option(c, "v_norm").get<bool>(), "options.v_norm = false");
  require(!option(c, "pb_relax").get<bool>(), "options.pb_relax = false");
  Json j = to_json(c);
  j["placement"] = "pre_crms";
  j["norm"] = Json{{"type", "crmsnorm"}, {"eps", c.norm.eps}, {"bias", false}};
  j["tied_embeddings"] = false;
  j["final_norm"] = true;
  return read_model_config(j, "Pre-CRMSNorm conversion target");
}

ModelConfig pre_ln_config_for(const ModelConfig& crms) {
  if (!placement_of(crms).compressed_stream)
    fail("pre_ln_config_for: the model has placement '{}', not 'pre_crms'", crms.placement.name());
  Json j = to_json(crms);
  j["placement"] = "pre";
  j["norm"] = Json{{"type", "layernorm"}, {"eps", crms.norm.eps}, {"bias", false}};
  j["init"].erase("from_pre_ln");
  return read_model_config(j, "the Pre-LN model a Pre-CRMSNorm one converts from");
}

namespace {

// The target must be the Pre-CRMSNorm form of the source: compare the explicit configs, minus the
// fields that do not change the function (init) or are inactive at evaluation (dropout).
void require_crms_form_of(const ModelConfig& source, const ModelConfig& target) {
  Json a = to_json(crms_config_for(source)), b = to_json(target);
  for (Json* j : {&a, &b}) {
    j->erase("init");
    j->erase("dropout");
    (*j)["norm"].erase("bias");
  }
  for (const auto& [key, value] : a.items())
    if (b[key] != value)
      fail(
          "convert_pre_ln_to_crms: the target model's {} is {}, the Pre-CRMSNorm form of the source needs {} "
          "(build the target from crms_config_for())",
          key, b[key].dump(), value.dump());
}

}  // namespace

void convert_pre_ln_to_crms(const Model& src, Model& dst) {
  const ModelConfig& c = src.config;
  require_crms_form_of(c, dst.config);
  const int64_t d = c.d_model, w = d - 1, V = c.vocab_size, ff = c.d_ff;
  Writer out(dst);
  std::set<std::string> used;
  auto get = [&](const std::string& name) {
    used.insert(name);
    return read(src, name);
  };
  auto copy = [&](const std::string& name, eng::Shape shape) { out.write(name, shape, get(name)); };

  out.write("embed.tokens.weight", {V, w}, compress_rows(get("embed.tokens.weight"), V, d));
  auto consumer = [&](const std::string& name, const std::vector<double>& gamma, int64_t rows) {
    out.write(name + ".weight", {rows, w}, compress_consumer(get(name + ".weight"), gamma, rows, d));
    if (c.bias) copy(name + ".bias", {rows});
  };
  auto producer = [&](const std::string& name, int64_t in) {
    out.write(name + ".weight", {w, in}, compress_producer(get(name + ".weight"), d, in));
    if (c.bias) out.write(name + ".bias", {w}, compress_producer(get(name + ".bias"), d, 1));
  };
  // An encoder-decoder's cross-attention reads the encoder's final norm: its k and v are that norm's consumers.
  const std::string memory_norm = "encoder.final_norm.weight";
  for (const StackSpec& stack : stacks(c)) {
    const std::string side = stack.prefix();
    if (c.positions == Positions::learned)
      out.write(side + "embed.positions.weight", {c.max_seq_len, w},
                compress_rows(get(side + "embed.positions.weight"), c.max_seq_len, d));
    if (c.embed_scale == EmbedScale::learned) copy(side + "embed.scale", {1});
    for (int i = 0; i < stack.layers; ++i)
      for (Branch branch : stack.branches()) {
        const std::string p = fmt::format("{}layers.{}.{}", side, i, branch_name(branch));
        const std::vector<double> gamma = get(p + ".in_norm.weight");
        if (branch == Branch::ffn) {
          consumer(p + ".fc1", gamma, ff);
          if (c.gated_ffn()) consumer(p + ".gate", gamma, ff);
          producer(p + ".fc2", ff);
          continue;
        }
        consumer(p + ".q", gamma, d);
        const std::vector<double> kv_gamma = branch == Branch::cross ? get(memory_norm) : gamma;
        for (const char* m : {".k", ".v"}) consumer(p + m, kv_gamma, d);
        producer(p + ".o", d);
      }
  }
  const std::string head_norm = c.encoder_decoder() ? "decoder.final_norm.weight" : "final_norm.weight";
  out.write("lm_head.weight", {V, w}, compress_consumer(get("lm_head.weight"), get(head_norm), V, d));
  out.finish();
  for (eng::TensorId id : src.graph.parameters())
    if (!used.contains(src.graph.spec(id).name))
      fail("convert_pre_ln_to_crms: the source parameter '{}' has no place in the conversion", src.graph.spec(id).name);
}

}  // namespace normlab::model
