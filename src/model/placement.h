#pragma once
// A placement says where the norms go. Each variant is one file in placements/ holding its paper,
// its equations, its defaults and switches, and a sublayer() that reads like the equation, written
// with the verbs of SubLayer below; registry.cpp lists the variants, one line each. The two
// sub-layers of block ℓ (attention, then FFN) each call sublayer(s, h) to turn the residual stream h
// into the next h. Variants that carry more than one stream (ResiDual, DLCL) replace the whole layer
// loop with stack(), which runs once per stack of an encoder-decoder: it takes each layer's sub-layers from
// st.spec().branches() and names its own tensors with st.name(). Every placement applies to all three
// shapes. Initialization rules run after the base init (see init.h).
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/graph.h"
#include "engine/ops.h"
#include "model/config.h"
#include "model/norm.h"
#include "model/transformer.h"

namespace normlab::model {

using engine::Graph;
using engine::TensorId;

struct Model;
struct InitContext;

enum class Branch { attn, cross, ffn };  // cross: a decoder's attention to the encoder's output

// What one stack of layers is (Stack below builds it). A decoder-only or encoder-only model has one (`single`,
// parameters `layers.{i}.*`); an encoder-decoder has two (`encoder.layers.{i}.*`, `decoder.layers.{i}.*`), and its
// decoder layers hold three sub-layers: self-attention, cross-attention, FFN.
struct StackSpec {
  enum Kind { single, encoder, decoder } kind = single;
  int layers = 0;
  bool causal = true;                        // self-attention sees only earlier positions
  TensorId key_lengths = engine::kNoTensor;  // the source's lengths [B]: padded keys are masked
  TensorId memory = engine::kNoTensor;       // decoder: the encoder's output, read by cross-attention
  // Decoding with a key-value cache (build_decoding_model): self-attention keeps the keys and values of up to
  // cache_capacity positions between forward passes, and the tokens of a pass start at position *position.
  int cache_capacity = 0;
  TensorId position = engine::kNoTensor;
  std::string prefix() const { return kind == single ? "" : kind == encoder ? "encoder." : "decoder."; }
  std::vector<Branch> branches() const {
    return kind == decoder ? std::vector{Branch::attn, Branch::cross, Branch::ffn}
                           : std::vector{Branch::attn, Branch::ffn};
  }
};
// The stacks of a model, each with its depth: one (`single`, n_layers), or an encoder-decoder's encoder (N) and
// decoder (M). Init rules that count layers run once per stack, over the parameters under its prefix.
std::vector<StackSpec> stacks(const ModelConfig& c);
std::string_view branch_name(Branch b);
enum class HeadScale { none, paper, fairseq };

// What the sub-layer function F contains besides its linear maps (Sub-LN, NormFormer).
struct BranchStyle {
  bool inner_norm = false;                 // Sub-LN: a norm over d on the concatenated heads, before W_O
  bool mid_norm = false;                   // Sub-LN / NormFormer: a norm over d_ff before fc2
  HeadScale head_scale = HeadScale::none;  // NormFormer: γ_h per head (before W_O, or on W_O's output)
};

// Model-level verbs shared by the default layer loop and stack-level variants.
class Stack {
 public:
  Stack(Graph& g, const ModelConfig& config, Landmarks& landmarks, StackSpec spec)
      : g_(g), config_(config), landmarks_(landmarks), spec_(std::move(spec)) {}
  Graph& graph() const { return g_; }
  const ModelConfig& config() const { return config_; }
  int layers() const { return spec_.layers; }
  const StackSpec& spec() const { return spec_; }
  class SubLayer sublayer(int layer, Branch branch) const;
  // A stack-level tensor's name: `name` under the stack's prefix ("encoder.", "decoder.", or none).
  std::string name(std::string_view name) const { return spec_.prefix() + std::string(name); }
  TensorId norm(const std::string& name, TensorId x, NormSpec spec = {}) const {
    return make_norm(g_, config_, this->name(name), x, spec);
  }
  TensorId add(const std::string& name, TensorId a, TensorId b, double alpha = 1, double beta = 1) const {
    return engine::add(g_, this->name(name), a, b, alpha, beta);
  }
  // Records x as the residual stream entering `layer` (layer = L: the stack's output), for probes. An
  // encoder-decoder's landmarks are its decoder's.
  void mark_stream(int layer, TensorId x) const;

 private:
  Landmarks* landmarks() const { return spec_.kind == StackSpec::encoder ? nullptr : &landmarks_; }
  Graph& g_;
  const ModelConfig& config_;
  Landmarks& landmarks_;
  StackSpec spec_;
};

// The verbs a placement uses inside one sub-layer. Names follow docs/variants.md: parameters
// `layers.{i}.{attn|ffn}.{slot}.*`, activations `layers.{i}.{attn|ffn}.{name}` (in an encoder-decoder prefixed by
// `encoder.` or `decoder.`, and `cross` for cross-attention).
class SubLayer {
 public:
  SubLayer(Graph& g, const ModelConfig& config, const StackSpec& spec, int layer, Branch branch,
           Landmarks* landmarks = nullptr);

  int layer() const { return layer_ + 1; }     // ℓ, counted from 1 as in the papers
  int index() const { return layer_; }         // i, counted from 0 as in names
  int layers() const { return spec_.layers; }  // L of this sub-layer's stack
  const StackSpec& spec() const { return spec_; }
  Branch kind() const { return branch_; }
  const ModelConfig& config() const { return config_; }
  Graph& graph() const { return g_; }
  std::string prefix() const;  // "layers.{i}.attn", "decoder.layers.{i}.cross" ...

  TensorId norm(const std::string& slot, TensorId x, NormSpec spec = {}) const;
  // The sub-layer's function F: attention or feed-forward, with dropout on its output.
  TensorId branch(TensorId x, BranchStyle style = {}) const;
  // α·a + β·b: the residual add and its constant-scaled forms.
  TensorId add(TensorId a, TensorId b, double alpha = 1, double beta = 1, const std::string& name = "residual") const;
  TensorId scale(TensorId x, double c, const std::string& name) const;
  TensorId center(TensorId x, const std::string& name) const;
  // a + p ⊙ b with p a learnable [1] scalar or [w] vector (a may be kNoTensor).
  TensorId scale_add(TensorId a, TensorId b, TensorId p, const std::string& name) const;
  TensorId gpas(TensorId x, TensorId gate, const std::string& name) const;
  // A learnable parameter `prefix.name` (per_layer: `layers.{i}.name`, shared by both sub-layers).
  TensorId scalar(const std::string& name, double init, bool per_layer = false) const;
  TensorId vector(const std::string& name, int64_t width, double init) const;

  double number(const std::string& option) const;
  bool flag(const std::string& option) const;
  std::string text(const std::string& option) const;

 private:
  TensorId learnable(const std::string& name, engine::Shape shape, double init) const;
  Graph& g_;
  const ModelConfig& config_;
  const StackSpec& spec_;
  int layer_;
  Branch branch_;
  Landmarks* landmarks_;
};

// One switch of `model.options`: its default (a JSON literal, which also fixes its type) and meaning; a string
// switch names its values ("none|full|per_head"), and a config giving any other is refused.
struct Switch {
  std::string_view name;
  std::string_view default_json;
  std::string_view help;
  std::string_view choices = "";
  // false: a resolved config (to_json) names the switch only when it differs from its default, so the configs of
  // runs stored before it existed, which studies compare before reusing a run, stay as they were.
  bool written_when_default = true;
};

struct Placement {
  std::string_view name;
  std::string_view display_name;     // as the papers and reports write it: "Post-LN", "LayerNorm Scaling"
  std::string_view paper;            // citation
  std::string_view equations;        // the sub-layer equations, one line
  bool final_norm = true;            // default for model.final_norm = "auto"
  std::string_view defaults = "{}";  // JSON merged under the user's model config
  std::span<const Switch> switches = {};
  TensorId (*sublayer)(const SubLayer& s, TensorId h) = nullptr;
  TensorId (*stack)(const Stack& st, TensorId embedded) = nullptr;  // replaces the layer loop
  void (*init)(InitContext& ctx) = nullptr;                         // after the base init
  std::string_view init_rule = "";                                  // one line, for `normlab variants`
  std::string_view init_source = "";  // where the init rule and init-related defaults come from (paper, code)
  std::string_view notes = "";        // paper-vs-code choices, for `normlab variants`
  bool zero_mean_branch = false;      // Pre-RMSNorm: branch outputs and embeddings are re-centered
  bool compressed_stream = false;     // Pre-CRMSNorm: the stream has width d − 1
  // A plain Pre-LN (a norm on each branch's input, nothing else): Jiang et al.'s conversion to Pre-CRMSNorm is exact.
  bool converts_to_crms = false;
  // What an export states beside the weights for this placement's equations (DeepNorm's α and β per stack, Admin's
  // ω), merged into its "constants"; nullptr: nothing.
  Json (*export_constants)(const ModelConfig& c) = nullptr;
};

const Placement& find_placement(std::string_view name);  // throws normlab::Error listing the known names
// The config's placement: its formula's (model/formula.h), or the built-in one of that name.
const Placement& placement_of(const ModelConfig& c);
std::span<const Placement* const> all_placements();
std::vector<std::string> placement_names();
// A placement as reports name it: a built-in's display name ("Post-LN"), any other text (a formula's file) as it is.
std::string placement_label(std::string_view placement);
// Every sub-layer of a model in the order a forward pass runs them: its name prefix, and how many sub-layers its
// stack holds (Admin's N, per stack).
struct SubLayerSite {
  std::string prefix;
  int stack_sublayers;
};
std::vector<SubLayerSite> sublayer_sites(const ModelConfig& c);
// Switches every placement accepts (QK-norm, soft-caps, DyT α ...).
std::span<const Switch> common_switches();
// The values a string switch of placement `p` takes (empty for a number or flag, or an unknown name).
std::vector<std::string> switch_choices(const Placement& p, std::string_view name);
// The value of switch `name`: the config's, or the switch's default.
Json option(const ModelConfig& c, const std::string& name);

}  // namespace normlab::model
