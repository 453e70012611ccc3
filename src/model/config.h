#pragma once
// The model's configuration: every field in docs/model.md, read strictly from JSON and written back
// fully explicit (defaults resolved) so a run directory records exactly what was trained.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "common/config_reader.h"

namespace normlab::model {

class Formula;
struct Placement;
extern const Placement kPreLn;  // the default (placements/pre_ln.cpp)

// A model's placement, in one field: a built-in one from the registry (placements/), or a formula (model/formula.h:
// model.placement's object or "@file"), which compiles to a placement of its own. Set when the config is read, or by
// set_placement in code; a name alone is never stored, so nothing reads an unresolved placement.
class PlacementRef {
 public:
  PlacementRef() = default;  // Pre-LN
  explicit PlacementRef(const Placement& builtin) : builtin_(&builtin) {}
  explicit PlacementRef(std::shared_ptr<const Formula> formula);
  const Placement& get() const;                              // what builds the model
  std::string_view name() const;                             // the built-in one's name, or the formula's
  const Formula* formula() const { return formula_.get(); }  // null for a built-in one
  Json json() const;                                         // as a config writes it: the name, or the formula
  bool operator==(std::string_view other) const { return name() == other; }

 private:
  const Placement* builtin_ = &kPreLn;
  std::shared_ptr<const Formula> formula_;
};

// decoder: causal attention, trained to predict the next token (a GPT). encoder: bidirectional attention, trained
// as a masked LM (BERT); its vocabulary is the tokenizer's plus one [MASK] id, the last. encoder_decoder: a
// translation model (Vaswani et al. 2017): a bidirectional encoder reads the padded source, a causal decoder with
// cross-attention predicts the target's next token; one vocabulary and embedding serve both sides.
enum class ModelShape { decoder, encoder, encoder_decoder };
inline constexpr Spellings<ModelShape, 3> kShapes{{{ModelShape::decoder, "decoder"},
                                                   {ModelShape::encoder, "encoder"},
                                                   {ModelShape::encoder_decoder, "encoder_decoder"}}};
// The FFN's activation (docs/model.md): the GELU (exact, or its tanh form), ReLU, or a gated unit.
enum class Activation { gelu, gelu_tanh, relu, swiglu, geglu, geglu_tanh };
inline constexpr Spellings<Activation, 6> kActivations{{{Activation::gelu, "gelu"},
                                                        {Activation::gelu_tanh, "gelu_tanh"},
                                                        {Activation::relu, "relu"},
                                                        {Activation::swiglu, "swiglu"},
                                                        {Activation::geglu, "geglu"},
                                                        {Activation::geglu_tanh, "geglu_tanh"}}};
// Learned absolute positions, rotary ones, or Vaswani et al.'s fixed sines and cosines.
enum class Positions { learned, rope, sinusoidal };
inline constexpr Spellings<Positions, 3> kPositions{
    {{Positions::learned, "learned"}, {Positions::rope, "rope"}, {Positions::sinusoidal, "sinusoidal"}}};
// The embedding's scale: none, √d (Vaswani et al.), or a learned scalar.
enum class EmbedScale { none, sqrt_d, learned };
inline constexpr Spellings<EmbedScale, 3> kEmbedScales{
    {{EmbedScale::none, "none"}, {EmbedScale::sqrt_d, "sqrt_d"}, {EmbedScale::learned, "learned"}}};

struct NormConfig {
  std::string type = "layernorm";  // a registered norm type (norm.h, norms/registry.cpp)
  double eps = 1e-5;
  bool bias = true;  // LayerNorm β
};

struct InitConfig {
  std::string scheme = "gpt2";     // gpt2 | scaled | xavier
  std::string xavier = "uniform";  // uniform | normal: the form of Xavier's draw (same std √(2/(fan_in+fan_out)))
  double std = 0.02;
  double embed_std = 0.02;
  std::string head = "auto";  // untied head: auto (as the scheme) | xavier_uniform | xavier_normal | normal
  double head_std = 0;        // head = normal: its std; 0 = d^(−1/2) (fairseq's untied output projection)
  // pre_crms only: start from the Pre-LN model this form converts from (crms_convert.h), drawn with the same seed and
  // converted, so that training starts from that model's function exactly (Jiang et al. 2023's equivalence).
  bool from_pre_ln = false;
};

// How a config spells each of them (messages, config.json).
inline std::string_view name(ModelShape v) { return name_of(v, kShapes); }
inline std::string_view name(Activation v) { return name_of(v, kActivations); }
inline std::string_view name(Positions v) { return name_of(v, kPositions); }
inline std::string_view name(EmbedScale v) { return name_of(v, kEmbedScales); }

struct ModelConfig {
  ModelShape shape = ModelShape::decoder;
  int vocab_size = 0;  // 0 = take it from the token data (plus [MASK] for an encoder)
  int d_model = 128;
  int n_layers = 4;            // the decoder's layers in an encoder_decoder
  int encoder_layers = 0;      // encoder_decoder only: the encoder's layers; 0 = n_layers
  double label_smoothing = 0;  // ε of the loss's target distribution (1 − ε)·one-hot + ε/V
  int n_heads = 4;
  int d_ff = 512;
  int max_seq_len = 128;
  NormConfig norm;
  PlacementRef placement;
  std::optional<bool> final_norm;  // unset = the placement's default
  bool embed_norm = false;         // a norm on the embedding output
  EmbedScale embed_scale = EmbedScale::none;
  Activation activation = Activation::gelu;
  Positions positions = Positions::learned;
  double rope_base = 10000;
  bool tied_embeddings = true;
  bool bias = true;
  double dropout = 0;
  InitConfig init;
  Json options = Json::object();  // switches, every one present (defaults filled in; `normlab variants`)

  int head_dim() const { return d_model / n_heads; }
  bool gated_ffn() const {
    return activation == Activation::swiglu || activation == Activation::geglu || activation == Activation::geglu_tanh;
  }
  bool encoder() const { return shape == ModelShape::encoder; }
  bool encoder_decoder() const { return shape == ModelShape::encoder_decoder; }
  int source_layers() const { return encoder_layers > 0 ? encoder_layers : n_layers; }
  // The [MASK] token of an encoder: the id after the tokenizer's vocabulary.
  int mask_id() const { return vocab_size - 1; }
  int stream_width() const;     // d_model, or d_model − 1 on Pre-CRMSNorm's compressed stream
  bool has_final_norm() const;  // resolves "auto" through the placement registry
};

// Names a built-in placement in a config built in code (read_model_config resolves what a config names).
void set_placement(ModelConfig& config, std::string_view name);

// Reads and validates (unknown keys, types, ranges, and cross-field rules such as n_heads | d_model).
// The placement's defaults sit between the built-in defaults and the user's section.
ModelConfig read_model_config(const Json& section, const std::string& where);
void validate(const ModelConfig& config, const std::string& where);
Json to_json(const ModelConfig& config);

}  // namespace normlab::model

// "{}" of a placement prints its name.
template <>
struct fmt::formatter<normlab::model::PlacementRef> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(const normlab::model::PlacementRef& placement, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(placement.name(), ctx);
  }
};
