#include "train/hf_families.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "model/presets.h"

namespace normlab::train {

namespace {

// Normlab's limit on model.max_seq_len (model/config.cpp).
constexpr int kMaxSeqLen = 1 << 16;

// config.json's keys, each refused in one sentence naming the file and the key.
class HfConfig {
 public:
  HfConfig(const Json& json, std::string file) : json_(json), file_(std::move(file)) {}

  // The key's value, or nullptr when it is absent or null (transformers' "not set").
  const Json* find(const char* key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void refuse(const char* key, std::string_view why) const {
    const Json* v = find(key);
    fail("{}: {} = {} {}", file_, key, v ? printable(v->dump(), 80) : "(absent)", why);
  }
  int count(const char* key) const {
    const Json* v = find(key);
    if (!v || !v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > (1 << 30))
      refuse(key, "is not a positive whole number, which every checkpoint of this family sets: fix config.json");
    return v->get<int>();
  }
  int count_or(const char* key, int fallback) const { return find(key) ? count(key) : fallback; }
  double number_or(const char* key, double fallback) const {
    const Json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number() || v->get<double>() < 0) refuse(key, "is not a non-negative number: fix config.json");
    return v->get<double>();
  }
  bool flag_or(const char* key, bool fallback) const {
    const Json* v = find(key);
    if (v && !v->is_boolean()) refuse(key, "is not true or false: fix config.json");
    return v ? v->get<bool>() : fallback;
  }
  std::string text_or(const char* key, std::string fallback) const {
    const Json* v = find(key);
    if (v && !v->is_string()) refuse(key, "is not a string: fix config.json");
    return v ? v->get<std::string>() : fallback;
  }

 private:
  const Json& json_;
  std::string file_;
};

HfFamily gpt2_family(const HfConfig& c, const HfCheckpoint& checkpoint) {
  HfFamily f{.model_type = "gpt2", .model = model::find_preset("gpt2").model};
  const int d = c.count("n_embd");
  const std::string act = c.text_or("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu")
    c.refuse("activation_function", "is not a GELU (gelu_new, gelu_pytorch_tanh or gelu): normlab imports those");
  if (!c.flag_or("scale_attn_weights", true))
    c.refuse("scale_attn_weights", "turns off the 1/√D attention scale, which normlab always applies");
  if (c.flag_or("scale_attn_by_inverse_layer_idx", false))
    c.refuse("scale_attn_by_inverse_layer_idx",
             "scales attention by 1/(layer + 1) (Stanford CRFM's runs), which normlab does not compute");
  if (c.count("n_positions") > kMaxSeqLen) c.refuse("n_positions", "exceeds normlab's 65536 positions");
  f.model.update(Json{{"vocab_size", c.count("vocab_size")},
                      {"d_model", d},
                      {"n_layers", c.count("n_layer")},
                      {"n_heads", c.count("n_head")},
                      {"d_ff", c.count_or("n_inner", 4 * d)},
                      {"max_seq_len", c.count("n_positions")},
                      {"activation", act == "gelu" ? "gelu" : "gelu_tanh"},
                      {"tied_embeddings", c.flag_or("tie_word_embeddings", true)}});
  f.model["norm"]["eps"] = c.number_or("layer_norm_epsilon", 1e-5);
  f.kv_heads = f.model["n_heads"].get<int>();
  // GPT2LMHeadModel.save_pretrained prefixes "transformer."; the original openai-community/gpt2 file has no prefix.
  const std::string p = checkpoint.has("transformer.wte.weight") ? "transformer." : "", h = p + "h.{i}.";
  const auto conv = [](std::string name, int part = 0, int parts = 1) {
    return HfTensorRule{std::move(name), HfLayout::conv1d, part, parts};
  };
  f.rules = {{"embed.tokens.weight", {p + "wte.weight"}},
             {"embed.positions.weight", {p + "wpe.weight"}},
             {"final_norm.weight", {p + "ln_f.weight"}},
             {"final_norm.bias", {p + "ln_f.bias"}},
             {"lm_head.weight", {"lm_head.weight"}},
             {"layers.{i}.attn.o.weight", conv(h + "attn.c_proj.weight")},
             {"layers.{i}.attn.o.bias", conv(h + "attn.c_proj.bias")},
             {"layers.{i}.ffn.fc1.weight", conv(h + "mlp.c_fc.weight")},
             {"layers.{i}.ffn.fc1.bias", conv(h + "mlp.c_fc.bias")},
             {"layers.{i}.ffn.fc2.weight", conv(h + "mlp.c_proj.weight")},
             {"layers.{i}.ffn.fc2.bias", conv(h + "mlp.c_proj.bias")}};
  for (const char* x : {"weight", "bias"}) {
    f.rules[fmt::format("layers.{{i}}.attn.in_norm.{}", x)] = {h + "ln_1." + x};
    f.rules[fmt::format("layers.{{i}}.ffn.in_norm.{}", x)] = {h + "ln_2." + x};
    for (int part = 0; part < 3; ++part)
      f.rules[fmt::format("layers.{{i}}.attn.{}.{}", "qkv"[part], x)] = conv(h + "attn.c_attn." + x, part, 3);
  }
  f.buffers = {".attn.bias", ".attn.masked_bias"};  // the causal mask, saved as a buffer by older versions
  return f;
}

// Llama's tensor names, shared by Mistral, Qwen2, Gemma 2 and OLMo 2; `norms` maps normlab's norm slots to the
// family's layer norms.
std::map<std::string, HfTensorRule> decoder_rules(const std::vector<std::pair<std::string, std::string>>& norms) {
  const std::string l = "model.layers.{i}.", s = l + "self_attn.", m = l + "mlp.";
  std::map<std::string, HfTensorRule> r = {{"embed.tokens.weight", {"model.embed_tokens.weight"}},
                                           {"final_norm.weight", {"model.norm.weight"}},
                                           {"lm_head.weight", {"lm_head.weight"}},
                                           {"layers.{i}.attn.o.weight", {s + "o_proj.weight"}},
                                           {"layers.{i}.attn.q_norm.weight", {s + "q_norm.weight"}},
                                           {"layers.{i}.attn.k_norm.weight", {s + "k_norm.weight", HfLayout::kv_heads}},
                                           {"layers.{i}.ffn.gate.weight", {m + "gate_proj.weight"}},
                                           {"layers.{i}.ffn.fc1.weight", {m + "up_proj.weight"}},
                                           {"layers.{i}.ffn.fc2.weight", {m + "down_proj.weight"}}};
  for (const char* x : {"weight", "bias"}) {
    r[fmt::format("layers.{{i}}.attn.q.{}", x)] = {s + "q_proj." + x};
    r[fmt::format("layers.{{i}}.attn.k.{}", x)] = {s + "k_proj." + x, HfLayout::kv_heads};
    r[fmt::format("layers.{{i}}.attn.v.{}", x)] = {s + "v_proj." + x, HfLayout::kv_heads};
  }
  for (const auto& [ours, theirs] : norms) r["layers.{i}." + ours + ".weight"] = {l + theirs + ".weight"};
  return r;
}

void check_attention(const HfConfig& c, int d, int heads, int kv_heads) {
  if (d % heads != 0) c.refuse("num_attention_heads", "does not divide hidden_size, as normlab's heads must");
  if (c.count_or("head_dim", d / heads) != d / heads)
    c.refuse("head_dim", "is not hidden_size / num_attention_heads, the only head width normlab's attention has");
  if (heads % kv_heads != 0) c.refuse("num_key_value_heads", "does not divide num_attention_heads");
  const Json* scaling = c.find("rope_scaling");
  const std::string kind = scaling && scaling->is_object() ? scaling->value("rope_type", scaling->value("type", ""))
                                                           : std::string(scaling ? "?" : "default");
  if (kind != "default")
    c.refuse("rope_scaling", "rescales RoPE's frequencies, which normlab does not: its logits would differ");
  if (c.flag_or("attention_bias", false) || c.flag_or("mlp_bias", false))
    c.refuse(c.flag_or("attention_bias", false) ? "attention_bias" : "mlp_bias",
             "adds biases this family's import does not map (Qwen2's q, k, v biases aside)");
}

// The sizes every Llama-like family shares. `window`: the sliding attention window (0 = none): the run's positions
// stop there, so that no query ever looks further back than the released model lets it.
void decoder_sizes(const HfConfig& c, HfFamily& f, bool tied_default, int window) {
  const int d = c.count("hidden_size"), heads = c.count("num_attention_heads");
  f.kv_heads = c.count_or("num_key_value_heads", heads);
  check_attention(c, d, heads, f.kv_heads);
  const int positions = c.count("max_position_embeddings");
  const int max_seq = std::min({positions, window > 0 ? window : positions, kMaxSeqLen});
  if (max_seq < positions)
    f.notes.push_back(fmt::format(
        "max_seq_len {} (config.json: max_position_embeddings {}{}): within it every layer sees what the released "
        "model's does",
        max_seq, positions, window > 0 ? fmt::format(", sliding_window {}", window) : ""));
  f.model.update(Json{{"vocab_size", c.count("vocab_size")},
                      {"d_model", d},
                      {"n_layers", c.count("num_hidden_layers")},
                      {"n_heads", heads},
                      {"d_ff", c.count("intermediate_size")},
                      {"max_seq_len", max_seq},
                      {"rope_base", c.number_or("rope_theta", 10000.0)},
                      {"tied_embeddings", c.flag_or("tie_word_embeddings", tied_default)}});
  f.model["norm"]["eps"] = c.number_or("rms_norm_eps", 1e-6);
  if (f.kv_heads < heads)
    f.notes.push_back(
        fmt::format("grouped-query attention ({} key/value heads for {} query heads): each query head "
                    "gets its own copy of its group's k and v, the same function",
                    f.kv_heads, heads));
}

// The FFN's activation: config.json's `key` must name `wanted` (transformers' ACT2FN name).
void check_activation(const HfConfig& c, const char* key, const std::vector<std::string>& wanted) {
  const std::string act = c.text_or(key, wanted.front());
  if (std::find(wanted.begin(), wanted.end(), act) == wanted.end())
    c.refuse(key, fmt::format("is not the family's {}: normlab's preset computes that one", wanted.front()));
}

HfFamily llama_family(const HfConfig& c, const std::string& type) {
  HfFamily f{.model_type = type, .model = model::find_preset(type == "qwen2" ? "qwen2" : "llama").model};
  check_activation(c, "hidden_act", {"silu"});
  int window = 0;
  if (type == "mistral") window = c.count_or("sliding_window", 0);
  if (type == "qwen2" && c.flag_or("use_sliding_window", false)) window = c.count_or("sliding_window", 0);
  decoder_sizes(c, f, false, window);
  f.rules = decoder_rules({{"attn.in_norm", "input_layernorm"}, {"ffn.in_norm", "post_attention_layernorm"}});
  return f;
}

HfFamily gemma2_family(const HfConfig& c) {
  HfFamily f{.model_type = "gemma2", .model = model::find_preset("gemma2").model};
  check_activation(c, c.find("hidden_activation") ? "hidden_activation" : "hidden_act",
                   {"gelu_pytorch_tanh", "gelu_tanh"});
  // Every other layer attends within a sliding window: stopping the positions there makes them all the same.
  decoder_sizes(c, f, true, c.count_or("sliding_window", 4096));
  const int head_dim = c.count("hidden_size") / c.count("num_attention_heads");
  if (c.count_or("query_pre_attn_scalar", head_dim) != head_dim)
    c.refuse("query_pre_attn_scalar", "is not the head width, so its attention scale is not normlab's 1/√D");
  f.model["options"]["attn_softcap"] = c.number_or("attn_logit_softcapping", 0.0);
  f.model["options"]["final_softcap"] = c.number_or("final_logit_softcapping", 0.0);
  // Gemma's RMSNorm computes x̂·(1 + w) and stores w: normlab's rmsnorm_gemma stores the same w.
  f.rules = decoder_rules({{"attn.in_norm", "input_layernorm"},
                           {"attn.out_norm", "post_attention_layernorm"},
                           {"ffn.in_norm", "pre_feedforward_layernorm"},
                           {"ffn.out_norm", "post_feedforward_layernorm"}});
  f.notes.push_back(
      "embedding × √d in fp32 (transformers rounds √d to the weights' dtype first, e.g. bf16: a small difference)");
  return f;
}

HfFamily olmo2_family(const HfConfig& c) {
  HfFamily f{.model_type = "olmo2", .model = model::find_preset("olmo2").model};
  check_activation(c, "hidden_act", {"silu"});
  decoder_sizes(c, f, false, 0);
  f.rules =
      decoder_rules({{"attn.out_norm", "post_attention_layernorm"}, {"ffn.out_norm", "post_feedforward_layernorm"}});
  return f;
}

}  // namespace

HfFamily read_hf_family(const HfCheckpoint& checkpoint) {
  const HfConfig c(checkpoint.config(), checkpoint.config_path().string());
  const std::string type = c.text_or("model_type", "");
  HfFamily f;
  if (type == "gpt2") f = gpt2_family(c, checkpoint);
  else if (type == "llama" || type == "mistral" || type == "qwen2") f = llama_family(c, type);
  else if (type == "gemma2") f = gemma2_family(c);
  else if (type == "olmo2") f = olmo2_family(c);
  else
    c.refuse("model_type",
             "is not a family normlab imports (gpt2, llama, mistral, qwen2, gemma2, olmo2): its tensor names and "
             "equations would be guesses");
  f.buffers.push_back(".rotary_emb.inv_freq");  // RoPE's frequencies, saved by some versions; normlab computes them
  // A tied model computes its head from the embedding; transformers ignores a saved lm_head.weight then, as here.
  if (f.model["tied_embeddings"].get<bool>()) f.buffers.push_back("lm_head.weight");
  return f;
}

bool hf_source(const HfFamily& family, const std::string& name, HfTensorRule* source) {
  std::string key = name, layer;
  if (name.starts_with("layers.")) {
    const size_t end = name.find('.', 7);
    if (end == std::string::npos) return false;
    layer = name.substr(7, end - 7);
    key = "layers.{i}" + name.substr(end);
  }
  const auto it = family.rules.find(key);
  if (it == family.rules.end()) return false;
  *source = it->second;
  if (const size_t at = source->name.find("{i}"); at != std::string::npos) source->name.replace(at, 3, layer);
  return true;
}

}  // namespace normlab::train
