#pragma once
// The model families `normlab import` reads, each mapped onto a normlab preset: which config.json keys set which
// model fields, and which Hugging Face tensor becomes which normlab parameter, in which layout. The names and
// equations were read from the families' transformers modeling code (modeling_gpt2.py, modeling_llama.py,
// modeling_mistral.py, modeling_qwen2.py, modeling_gemma2.py, modeling_olmo2.py); nothing is guessed: a key or
// tensor this mapping does not know is refused, not dropped.
#include <map>
#include <string>
#include <vector>

#include "common/config_reader.h"
#include "train/hf_checkpoint.h"

namespace normlab::train {

// How a Hugging Face tensor is laid out against normlab's parameter.
enum class HfLayout {
  copy,      // the same shape and order
  conv1d,    // GPT-2's Conv1D: [in, parts·out] with y = x W; normlab's [out, in] is part `part`'s columns, transposed
             // (a bias [parts·out]: part `part`'s slice). c_attn fuses q, k, v as parts 0, 1, 2
  kv_heads,  // grouped-query k, v (and OLMo 2's k-norm): kv_heads blocks of head_dim rows; normlab gives every query
             // head its own copy, head h taking block h / (n_heads / kv_heads) (transformers' repeat_kv)
};

struct HfTensorRule {
  std::string name;  // the Hugging Face name, "{i}" standing for the layer
  HfLayout layout = HfLayout::copy;
  int part = 0, parts = 1;
};

struct HfFamily {
  std::string model_type;
  Json model;        // normlab's model section: the family's preset, sized and set from config.json
  int kv_heads = 0;  // key/value heads in the checkpoint (n_heads without grouped-query attention)
  std::map<std::string, HfTensorRule> rules;  // normlab parameter name ("{i}" for the layer) → its source
  std::vector<std::string> buffers;           // name endings of saved buffers that hold no weights (skipped)
  std::vector<std::string> notes;             // where the run departs from the released model, and why it is exact
};

// The family config.json names, with its model section; fails naming config.json and the key for an unknown
// model_type, a missing or impossible size, or a setting normlab does not compute (RoPE scaling, a head_dim other
// than hidden_size / num_attention_heads ...).
HfFamily read_hf_family(const HfCheckpoint& checkpoint);

// The source of normlab parameter `name` ("layers.3.attn.k.weight"), its layer filled in; false if no rule has it.
bool hf_source(const HfFamily& family, const std::string& name, HfTensorRule* source);

}  // namespace normlab::train
