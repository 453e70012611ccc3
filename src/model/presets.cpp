#include "model/presets.h"

#include <fmt/core.h>

#include <cmath>

#include "common/error.h"

namespace normlab::model {

namespace {

// The small default size; gated FFNs get ≈ 8d/3 (Llama's rule, rounded to 32) so their parameter count matches a
// 4d GELU FFN's.
Json sized(Json model, bool gated) {
  Json size{{"d_model", 128}, {"n_layers", 4}, {"n_heads", 4}, {"d_ff", gated ? 352 : 512}, {"max_seq_len", 128}};
  size.update(model);
  return size;
}

// The 2017 Transformer's optimizer (§5.3): Adam (0.9, 0.98, 1e-9), no weight decay or clipping, and the schedule
// d^−0.5 · min(step^−0.5, step · warmup^−1.5), which normlab's noam schedule is when lr = (d · warmup)^−0.5.
Json vaswani_train(int d_model, int warmup) {
  Json train = Json::parse(R"({"seq_len": 64, "steps": 8000, "schedule": "noam", "beta1": 0.9, "beta2": 0.98,
      "adam_eps": 1e-9, "weight_decay": 0.0, "clip": 0.0})");
  train["warmup"] = warmup;
  train["lr"] = 1 / std::sqrt(static_cast<double>(d_model) * warmup);
  return train;
}

std::vector<Preset> make_presets() {
  return {
      {"gpt2",
       "GPT-2: Pre-LN, LayerNorm with bias, GELU (tanh form), learned positions, tied, scaled init",
       "Radford et al. 2019, Language Models are Unsupervised Multitask Learners; openai-community/gpt2 config.json "
       "(layer_norm_epsilon 1e-5, initializer_range 0.02, tie_word_embeddings, activation_function gelu_new: the tanh "
       "approximation) and model.py's 1/sqrt(2L) residual init",
       sized(Json::parse(R"({"placement": "pre", "final_norm": true, "norm": {"type": "layernorm", "eps": 1e-5,
             "bias": true}, "activation": "gelu_tanh", "positions": "learned", "tied_embeddings": true, "bias": true,
             "init": {"scheme": "scaled", "std": 0.02, "embed_std": 0.02}})"),
             false),
       {}},
      {"bert",
       "BERT: an encoder trained as a masked LM; Post-LN, LayerNorm ε 1e-12 on the embeddings and after every "
       "sub-layer, GELU, learned positions",
       "Devlin et al. 2019, BERT (arXiv 1810.04805); google-bert/bert-base-uncased config.json (layer_norm_eps 1e-12, "
       "hidden_act gelu, initializer_range 0.02)",
       sized(Json::parse(R"({"shape": "encoder", "placement": "post", "final_norm": false, "embed_norm": true,
             "norm": {"type": "layernorm", "eps": 1e-12, "bias": true}, "activation": "gelu", "positions": "learned",
             "tied_embeddings": true, "bias": true, "init": {"scheme": "gpt2", "std": 0.02, "embed_std": 0.02}})"),
             false),
       {"no next-sentence prediction, so no token-type embeddings",
        "no MLM head transform (dense + GELU + LayerNorm before the tied decoder)"}},
      {"llama",
       "Llama 2: Pre-RMSNorm ε 1e-5, SwiGLU, RoPE base 10000, no biases, untied head",
       "Touvron et al. 2023, Llama 2 (arXiv 2307.09288); meta-llama/Llama-2-7b-hf config.json (rms_norm_eps 1e-5, "
       "rope_theta 10000, hidden_act silu, tie_word_embeddings false, initializer_range 0.02)",
       sized(Json::parse(R"({"placement": "pre", "final_norm": true, "norm": {"type": "rmsnorm", "eps": 1e-5},
             "activation": "swiglu", "positions": "rope", "rope_base": 10000.0, "tied_embeddings": false,
             "bias": false, "init": {"scheme": "gpt2", "std": 0.02, "embed_std": 0.02}})"),
             true),
       {}},
      {"qwen2",
       "Qwen2: Pre-RMSNorm ε 1e-6, SwiGLU, RoPE base 1e6, biases on q, k, v only, tied (small models)",
       "Yang et al. 2024, Qwen2 Technical Report (arXiv 2407.10671); Qwen/Qwen2-0.5B config.json (rms_norm_eps 1e-6, "
       "rope_theta 1000000, tie_word_embeddings true, initializer_range 0.02; attention q/k/v with bias, o without)",
       sized(Json::parse(R"({"placement": "pre", "final_norm": true, "norm": {"type": "rmsnorm", "eps": 1e-6},
             "activation": "swiglu", "positions": "rope", "rope_base": 1000000.0, "tied_embeddings": true,
             "bias": false, "options": {"qkv_bias": true},
             "init": {"scheme": "gpt2", "std": 0.02, "embed_std": 0.02}})"),
             true),
       {"grouped-query attention is not modelled (every head has its own k and v)"}},
      {"deepseek",
       "DeepSeek LLM: Pre-RMSNorm ε 1e-6, SwiGLU, RoPE base 10000, no biases, untied head",
       "DeepSeek-AI 2024, DeepSeek LLM (arXiv 2401.02954); deepseek-ai/deepseek-llm-7b-base config.json "
       "(rms_norm_eps 1e-6, rope_theta 10000, tie_word_embeddings false, initializer_range 0.02)",
       sized(Json::parse(R"({"placement": "pre", "final_norm": true, "norm": {"type": "rmsnorm", "eps": 1e-6},
             "activation": "swiglu", "positions": "rope", "rope_base": 10000.0, "tied_embeddings": false,
             "bias": false, "init": {"scheme": "gpt2", "std": 0.02, "embed_std": 0.02}})"),
             true),
       {"the dense DeepSeek LLM; V2/V3's multi-head latent attention and mixture of experts are not modelled"}},
      {"glm",
       "GLM-130B: DeepNorm (Post-LN, up-weighted shortcut), LayerNorm, GeGLU, RoPE",
       "Zeng et al. 2022, GLM-130B (arXiv 2210.02414), §2.1: DeepNorm, GeGLU, rotary positions",
       sized(Json::parse(R"({"placement": "deepnorm", "norm": {"type": "layernorm", "eps": 1e-5, "bias": true},
             "activation": "geglu", "positions": "rope", "rope_base": 10000.0, "tied_embeddings": true,
             "bias": true})"),
             true),
       {"DeepNorm's constants are DeepNet's decoder-only α = (2L)^(1/4), β = (8L)^(−1/4) by default, so that runs "
        "of this preset stay comparable across versions; GLM-130B's α = (2L)^(1/2), β = (2L)^(−1/2) (§2.1) are "
        "--set model.options.deepnorm_constants=glm130b",
        "GLM's bidirectional prefix attention and 2-D positions are not modelled: plain causal attention, 1-D RoPE"}},
      {"gemma2",
       "Gemma 2: sandwich RMSNorm (1 + γ) ε 1e-6, GeGLU (tanh form), RoPE, √d embedding scale, soft-caps 50 / 30",
       "Gemma Team 2024, Gemma 2 (arXiv 2408.00118); google/gemma-2-2b config.json (rms_norm_eps 1e-6, "
       "attn_logit_softcapping 50, final_logit_softcapping 30, rope_theta 10000, tie_word_embeddings true, "
       "hidden_activation gelu_pytorch_tanh)",
       sized(Json::parse(R"({"placement": "gemma2", "final_norm": true, "norm": {"type": "rmsnorm_gemma",
             "eps": 1e-6}, "embed_scale": "sqrt_d", "activation": "geglu_tanh", "positions": "rope",
             "rope_base": 10000.0, "tied_embeddings": true, "bias": false,
             "options": {"attn_softcap": 50.0, "final_softcap": 30.0}})"),
             true),
       {"every layer attends globally: the alternating 4096-token sliding-window layers are not modelled",
        "grouped-query attention is not modelled"}},
      {"olmo2",
       "OLMo 2: RMSNorm on each sub-layer's output (reordered norm), full-width QK-norm, SwiGLU, RoPE 5e5",
       "OLMo Team 2025, 2 OLMo 2 Furious (arXiv 2501.00656); allenai/OLMo-2-1124-7B config.json (rms_norm_eps 1e-6, "
       "rope_theta 500000, tie_word_embeddings false)",
       sized(Json::parse(R"({"placement": "olmo2", "final_norm": true, "norm": {"type": "rmsnorm", "eps": 1e-6},
             "activation": "swiglu", "positions": "rope", "rope_base": 500000.0, "tied_embeddings": false,
             "bias": false, "options": {"qk_norm": "full"}})"),
             true),
       {"the z-loss is not included"}},
      {"vaswani",
       "The Transformer of 2017 (base) at a CPU size: a Post-LN encoder-decoder, ReLU, sinusoidal positions, √d-scaled "
       "shared embeddings, dropout and label smoothing 0.1, Adam (0.9, 0.98, 1e-9) with the Noam schedule; "
       "translates KJV → Reina-Valera (data/kjv-rv) and ends with BLEU and chrF",
       "Vaswani et al. 2017, Attention Is All You Need (arXiv 1706.03762): §3.1 LayerNorm(x + Sublayer(x)), 6 "
       "encoder and 6 decoder layers; §3.3 FFN max(0, xW₁ + b₁)W₂ + b₂, d_ff = 4d; §3.4 one matrix for both "
       "embeddings and the pre-softmax map, embeddings × √d; §3.5 sines and cosines; §5.3 Adam β₁ 0.9, β₂ 0.98, "
       "ε 1e-9, lrate = d^−0.5 · min(step^−0.5, step · warmup^−1.5); §5.4 dropout 0.1 on every sub-layer output and "
       "on the embedding sums, label smoothing 0.1. The init, which the paper does not give, is fairseq's transformer "
       "(Xavier-uniform matrices, embeddings N(0, d^−1/2))",
       sized(Json::parse(R"({"shape": "encoder_decoder", "n_layers": 6, "placement": "post", "final_norm": false,
             "norm": {"type": "layernorm", "eps": 1e-5, "bias": true}, "embed_scale": "sqrt_d",
             "activation": "relu", "positions": "sinusoidal", "tied_embeddings": true, "bias": true, "dropout": 0.1,
             "label_smoothing": 0.1, "init": {"scheme": "xavier", "xavier": "uniform", "embed_std": 0.0}})"),
             false),
       {"the base model's d 512, 8 heads and d_ff 2048 are scaled down to d 128, 4 heads, d_ff 512 (the paper's "
        "4000 warm-up steps kept); train.lr = (128 · 4000)^−0.5 makes normlab's noam schedule, "
        "lr · min(step/warmup, √(warmup/step)), the paper's formula exactly: resizing d_model or warmup needs "
        "train.lr = (d · warmup)^−0.5 set along",
        "batches of 16 sentence pairs of up to 64 tokens a side instead of ≈ 25,000 source and 25,000 target "
        "tokens, 8000 steps instead of 100,000, no checkpoint averaging; BLEU and chrF by greedy decoding (the "
        "paper decodes with beam 4 and GNMT's length penalty 0.6; normlab translate --beam 4 searches with "
        "fairseq's length normalization)",
        "one SentencePiece BPE vocabulary of 8000 for both languages (the paper: shared BPE of about 37,000 for "
        "English-German)",
        "LayerNorm ε is not in the paper: 1e-5, PyTorch's and fairseq's default"},
       vaswani_train(128, 4000)},
  };
}

}  // namespace

const std::vector<Preset>& all_presets() {
  static const std::vector<Preset> presets = make_presets();
  return presets;
}

const Preset& find_preset(const std::string& name) {
  std::string known;
  for (const Preset& p : all_presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  fail("unknown preset '{}' (known: {}; `normlab presets` describes them)", printable(name), known);
}

}  // namespace normlab::model
