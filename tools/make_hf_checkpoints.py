#!/usr/bin/python3
"""Small random checkpoints in the Hugging Face layout of each family normlab imports, with reference logits.

    make_hf_checkpoints.py OUT [--family NAME ...]

For each family (gpt2, llama, qwen2, mistral, gemma2, olmo2) it writes OUT/<family>/:

    config.json                          the keys the family's transformers config class reads
    model.safetensors                    or model-0000X-of-0000Y.safetensors + model.safetensors.index.json
    reference.safetensors                "tokens" I32 [T] and "logits" F64 [T, V]: this script's forward pass
    vocab.json, merges.txt               gpt2 only: a byte-level BPE vocabulary of its 120 ids (gpt2_tokenizer)

No weights are downloaded: every tensor is drawn at random (seeded), under the names, shapes and dtypes that the
families' modeling code saves (GPT-2's Conv1D weights as [in, out], its q, k, v fused in c_attn; grouped-query k and v
with fewer heads; Gemma's RMSNorm weight as the offset w of its gain 1 + w; a tied head left out of the file). The
forward pass below is written from the papers' equations and the modeling code's, not imported from transformers:
normlab's importer must agree with it, so it must not share normlab's code or its assumptions. It runs in float64 on
the stored values (a BF16 tensor is widened exactly), so the logits are the exact function of the saved weights up to
float64 rounding.

Uses only torch and the standard library: the safetensors files are written by hand (an 8-byte little-endian header
length, a JSON header, the raw little-endian data).
"""
import argparse
import ctypes
import json
import math
import os
import struct

import torch

DTYPE_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.float64: "F64",
               torch.int32: "I32"}


def tensor_bytes(t):
    t = t.contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> torch tensor. Data in name order; the header padded with spaces to 8 bytes."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensor_bytes(tensors[name])
        header[name] = {"dtype": DTYPE_NAMES[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def save_checkpoint(folder, tensors, shards):
    """One model.safetensors, or `shards` files with the index transformers writes (weight_map: name -> file)."""
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors, {"format": "pt"})
        return
    names = sorted(tensors)
    weight_map, total = {}, 0
    for s in range(shards):
        part = names[s::shards]
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(folder, file), {n: tensors[n] for n in part}, {"format": "pt"})
        for n in part:
            weight_map[n] = file
            total += tensors[n].numel() * tensors[n].element_size()
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


# ---------------------------------------------------------------- the forward pass, from the equations

def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_tanh(x):  # Hendrycks & Gimpel's tanh form: GPT-2's gelu_new, Gemma's gelu_pytorch_tanh
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1 + torch.exp(-x))


def rotary(x, base):
    """x [heads, T, D]; the GPT-NeoX pairing that HF's rotate_half uses: (j, j + D/2) turn by t·base^(−2j/D)."""
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(angle), torch.sin(angle)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def attention(q, k, v, heads, kv_heads, scale, rope_base=None, softcap=None):
    """q [T, H·D], k and v [T, KV·D]; query head h reads key/value head h // (H/KV). Causal."""
    t = q.shape[0]
    d = q.shape[1] // heads
    q = q.view(t, heads, d).transpose(0, 1)
    k = k.view(t, kv_heads, d).transpose(0, 1)
    v = v.view(t, kv_heads, d).transpose(0, 1)
    if rope_base is not None:
        q, k = rotary(q, rope_base), rotary(k, rope_base)
    group = heads // kv_heads
    k = k[torch.arange(heads) // group]
    v = v[torch.arange(heads) // group]
    scores = q @ k.transpose(1, 2) * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(t, heads * d)


def gpt2_forward(p, c, tokens):
    pre = "transformer."
    d, heads = c["n_embd"], c["n_head"]
    eps = c["layer_norm_epsilon"]
    x = p[pre + "wte.weight"][tokens] + p[pre + "wpe.weight"][: len(tokens)]
    for i in range(c["n_layer"]):
        h = f"{pre}h.{i}."
        a = layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]  # Conv1D: x W + b, W [in, out]
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        o = attention(q, k, v, heads, heads, 1 / math.sqrt(d // heads))
        x = x + o @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps)
        m = gelu_tanh(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
        x = x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    x = layer_norm(x, p[pre + "ln_f.weight"], p[pre + "ln_f.bias"], eps)
    return x @ p[pre + "wte.weight"].T  # the tied head


def linear(p, name, x):
    y = x @ p[name + ".weight"].T
    return y + p[name + ".bias"] if name + ".bias" in p else y


def head(p, c, x):
    table = p["model.embed_tokens.weight"] if c["tie_word_embeddings"] else p["lm_head.weight"]
    return x @ table.T


def decoder_attention(p, c, a, i, q_norm=None, k_norm=None):
    s = f"model.layers.{i}.self_attn."
    q, k, v = linear(p, s + "q_proj", a), linear(p, s + "k_proj", a), linear(p, s + "v_proj", a)
    if q_norm:  # OLMo 2: RMSNorm over the whole projection, before the heads are split and rotated
        q, k = q_norm(q, p[s + "q_norm.weight"]), k_norm(k, p[s + "k_norm.weight"])
    heads = c["num_attention_heads"]
    d = c["hidden_size"] // heads
    scale = c.get("query_pre_attn_scalar", d) ** -0.5
    o = attention(q, k, v, heads, c["num_key_value_heads"], scale, c["rope_theta"], c.get("attn_logit_softcapping"))
    return linear(p, s + "o_proj", o)


def mlp(p, i, x, act):
    m = f"model.layers.{i}.mlp."
    return linear(p, m + "down_proj", act(linear(p, m + "gate_proj", x)) * linear(p, m + "up_proj", x))


def llama_forward(p, c, tokens):
    """Llama, Mistral, Qwen2: Pre-RMSNorm, SwiGLU, RoPE (Touvron et al. 2023; Qwen2 adds q, k, v biases)."""
    eps = c["rms_norm_eps"]
    x = p["model.embed_tokens.weight"][tokens]
    for i in range(c["num_hidden_layers"]):
        l = f"model.layers.{i}."
        x = x + decoder_attention(p, c, rms_norm(x, p[l + "input_layernorm.weight"], eps), i)
        x = x + mlp(p, i, rms_norm(x, p[l + "post_attention_layernorm.weight"], eps), silu)
    return head(p, c, rms_norm(x, p["model.norm.weight"], eps))


def gemma2_forward(p, c, tokens):
    """Gemma 2: RMSNorm with gain (1 + w) before and after each sub-layer, embedding × √d, GeGLU, soft-caps."""
    eps = c["rms_norm_eps"]

    def norm(x, w):
        return rms_norm(x, 1 + w, eps)

    x = p["model.embed_tokens.weight"][tokens] * math.sqrt(c["hidden_size"])
    for i in range(c["num_hidden_layers"]):
        l = f"model.layers.{i}."
        a = decoder_attention(p, c, norm(x, p[l + "input_layernorm.weight"]), i)
        x = x + norm(a, p[l + "post_attention_layernorm.weight"])
        m = mlp(p, i, norm(x, p[l + "pre_feedforward_layernorm.weight"]), gelu_tanh)
        x = x + norm(m, p[l + "post_feedforward_layernorm.weight"])
    logits = head(p, c, norm(x, p["model.norm.weight"]))
    cap = c["final_logit_softcapping"]
    return cap * torch.tanh(logits / cap)


def olmo2_forward(p, c, tokens):
    """OLMo 2: RMSNorm on each sub-layer's output (no input norm), full-width RMSNorm on q and k, SwiGLU."""
    eps = c["rms_norm_eps"]

    def norm(x, w):
        return rms_norm(x, w, eps)

    x = p["model.embed_tokens.weight"][tokens]
    for i in range(c["num_hidden_layers"]):
        l = f"model.layers.{i}."
        x = x + norm(decoder_attention(p, c, x, i, norm, norm), p[l + "post_attention_layernorm.weight"])
        x = x + norm(mlp(p, i, x, silu), p[l + "post_feedforward_layernorm.weight"])
    return head(p, c, norm(x, p["model.norm.weight"]))


# ---------------------------------------------------------------- the checkpoints

SIZE = {"vocab_size": 120, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 48, "max_position_embeddings": 16}
TOKENS = [5, 60, 0, 17, 42, 3, 3, 29]


class Draw:
    """Seeded random tensors at scales that keep every activation of order 1, so a mis-mapped tensor shows."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def normal(self, *shape, std=1.0, mean=0.0):
        return mean + std * torch.randn(*shape, generator=self.g, dtype=torch.float32)

    def matrix(self, out, inp):  # [out, in], std 1/√in
        return self.normal(out, inp, std=inp ** -0.5)


def gpt2_tensors(c, draw):
    d, ff, v, pre = c["n_embd"], 4 * c["n_embd"], c["vocab_size"], "transformer."
    t = {pre + "wte.weight": draw.normal(v, d), pre + "wpe.weight": draw.normal(c["n_positions"], d, std=0.5),
         pre + "ln_f.weight": draw.normal(d, std=0.2, mean=1), pre + "ln_f.bias": draw.normal(d, std=0.2)}
    for i in range(c["n_layer"]):
        h = f"{pre}h.{i}."
        for ln in ("ln_1", "ln_2"):
            t[h + ln + ".weight"], t[h + ln + ".bias"] = draw.normal(d, std=0.2, mean=1), draw.normal(d, std=0.2)
        # Conv1D stores [in, out]: the transpose of a torch.nn.Linear weight.
        for name, inp, out in (("attn.c_attn", d, 3 * d), ("attn.c_proj", d, d), ("mlp.c_fc", d, ff),
                               ("mlp.c_proj", ff, d)):
            t[h + name + ".weight"] = draw.matrix(out, inp).T.contiguous()
            t[h + name + ".bias"] = draw.normal(out, std=0.2)
    return t


def decoder_tensors(c, draw, norms, qkv_bias=False, qk_norm=False, norm_mean=1.0):
    d, ff, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    heads, kv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = d // heads
    t = {"model.embed_tokens.weight": draw.normal(v, d), "model.norm.weight": draw.normal(d, std=0.2, mean=norm_mean)}
    if not c["tie_word_embeddings"]:
        t["lm_head.weight"] = draw.matrix(v, d)
    for i in range(c["num_hidden_layers"]):
        s, m, l = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp.", f"model.layers.{i}."
        for name, out in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
            t[s + name + ".weight"] = draw.matrix(out, d)
            if qkv_bias:
                t[s + name + ".bias"] = draw.normal(out, std=0.2)
        t[s + "o_proj.weight"] = draw.matrix(d, heads * hd)
        if qk_norm:
            t[s + "q_norm.weight"] = draw.normal(heads * hd, std=0.2, mean=1)
            t[s + "k_norm.weight"] = draw.normal(kv * hd, std=0.2, mean=1)
        t[m + "gate_proj.weight"], t[m + "up_proj.weight"] = draw.matrix(ff, d), draw.matrix(ff, d)
        t[m + "down_proj.weight"] = draw.matrix(d, ff)
        for n in norms:
            t[l + n + ".weight"] = draw.normal(d, std=0.2, mean=norm_mean)
    return t


def llama_config(model_type, **extra):
    c = dict(SIZE, model_type=model_type, architectures=[], hidden_act="silu", num_key_value_heads=2,
             rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None, tie_word_embeddings=False,
             attention_bias=False, torch_dtype="float32")
    c.update(extra)
    return c


def families():
    """name -> (config, tensors(config, draw), forward, storage dtype, shards)."""
    gemma2 = llama_config("gemma2", architectures=["Gemma2ForCausalLM"], hidden_activation="gelu_pytorch_tanh",
                          rms_norm_eps=1e-6, head_dim=8, query_pre_attn_scalar=8, attn_logit_softcapping=5.0,
                          final_logit_softcapping=10.0, sliding_window=8, tie_word_embeddings=True,
                          torch_dtype="bfloat16")
    del gemma2["hidden_act"]  # Gemma2Config names its activation hidden_activation
    llama_norms = ("input_layernorm", "post_attention_layernorm")
    gpt2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 120, "n_embd": 32, "n_layer": 2,
            "n_head": 4, "n_inner": None, "n_positions": 16, "layer_norm_epsilon": 1e-5,
            "activation_function": "gelu_new", "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
            "reorder_and_upcast_attn": False, "tie_word_embeddings": True, "torch_dtype": "float32"}
    return {
        "gpt2": (gpt2, gpt2_tensors, gpt2_forward, torch.float32, 1),
        "llama": (llama_config("llama", architectures=["LlamaForCausalLM"], mlp_bias=False, torch_dtype="bfloat16"),
                  lambda c, g: decoder_tensors(c, g, llama_norms), llama_forward, torch.bfloat16, 2),
        "qwen2": (llama_config("qwen2", architectures=["Qwen2ForCausalLM"], rms_norm_eps=1e-6, rope_theta=1e6,
                               tie_word_embeddings=True, use_sliding_window=False, sliding_window=4096),
                  lambda c, g: decoder_tensors(c, g, llama_norms, qkv_bias=True), llama_forward, torch.float32, 1),
        "mistral": (llama_config("mistral", architectures=["MistralForCausalLM"], num_key_value_heads=1,
                                 sliding_window=8, torch_dtype="bfloat16"),
                    lambda c, g: decoder_tensors(c, g, llama_norms), llama_forward, torch.bfloat16, 1),
        "gemma2": (gemma2,
                   lambda c, g: decoder_tensors(c, g, ("input_layernorm", "post_attention_layernorm",
                                                       "pre_feedforward_layernorm", "post_feedforward_layernorm"),
                                                norm_mean=0.0),
                   gemma2_forward, torch.bfloat16, 1),
        "olmo2": (llama_config("olmo2", architectures=["Olmo2ForCausalLM"], rms_norm_eps=1e-6, rope_theta=5e5),
                  lambda c, g: decoder_tensors(c, g, ("post_attention_layernorm", "post_feedforward_layernorm"),
                                               qk_norm=True),
                  olmo2_forward, torch.float32, 3),
    }


# A GPT-2 tokenizer in the released files' format for the 120-id gpt2 checkpoint, so that a test can go from text to
# the imported model's loss. GPT-2's byte-to-unicode map writes a printable ASCII byte as itself, space as "Ġ" and
# newline as "Ċ"; only those 96 bytes are in this vocabulary (the released one has all 256), so it takes ASCII text.
# The merges join syllables of the tests' pseudo-English (tests/train/tiny_corpus.h); <|endoftext|> is the last id, as
# GPT-2's 50256 is.
GPT2_MERGES = ["t h", "th e", "Ġ the", "a n", "Ġ an", "l o", "r a", "m i", "k e", "s t", "st o", "v e", "ve r", "u n",
               "d e", "de r", "i n", "in g", "a l", "p o", "t e", "te s", "n d"]


def gpt2_tokenizer(folder, vocab_size):
    symbols = [chr(b) for b in range(33, 127)] + ["Ġ", "Ċ"] + ["".join(m.split(" ")) for m in GPT2_MERGES]
    vocab = {s: i for i, s in enumerate(symbols)}
    vocab["<|endoftext|>"] = len(symbols)
    assert len(vocab) == vocab_size == len(symbols) + 1
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(GPT2_MERGES) + "\n")


def make(out, name, seed):
    config, make_tensors, forward, dtype, shards = families()[name]
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    stored = {n: t.to(dtype) for n, t in make_tensors(config, Draw(seed)).items()}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_checkpoint(folder, stored, shards)
    if name == "gpt2":
        gpt2_tokenizer(folder, config["vocab_size"])
    tokens = torch.tensor(TOKENS, dtype=torch.int64)
    logits = forward({n: t.to(torch.float64) for n, t in stored.items()}, config, tokens)
    write_safetensors(os.path.join(folder, "reference.safetensors"),
                      {"tokens": tokens.to(torch.int32), "logits": logits.contiguous()})
    return folder


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--family", action="append", choices=sorted(families()), help="default: all")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for i, name in enumerate(args.family or sorted(families())):
        print(make(args.out, name, args.seed * 100 + i))


if __name__ == "__main__":
    main()
