#!/usr/bin/env python3
"""Random checkpoints of released models' real shapes, for measuring what `normlab import`, `eval` and `probe` need.

Written with tools/make_hf_checkpoints.py's layouts and draws (no forward pass: these are too large for a float64
reference), each with ids.txt, 20000 random token ids for `--token-ids`. docs/usage.md's "What fits" table was
measured on them:

    python3 tools/make_sized_checkpoints.py OUT --model tinyllama
    normlab import OUT/tinyllama --out RUN --token-ids OUT/tinyllama/ids.txt
    /usr/bin/time -v normlab eval --run RUN --batches 1
"""
import argparse
import json
import os

import torch

import make_hf_checkpoints as h

LLAMA_NORMS = ("input_layernorm", "post_attention_layernorm")


def gpt2_small():
    c = h.families()["gpt2"][0]
    c.update(vocab_size=50257, n_embd=768, n_layer=12, n_head=12, n_positions=1024)
    return c, h.gpt2_tensors(c, h.Draw(1)), torch.float32, 1


def tinyllama():  # TinyLlama-1.1B: 22 layers, d 2048, 32 heads with 4 key/value heads, BF16 in 3 shards
    c = h.llama_config("llama", architectures=["LlamaForCausalLM"], mlp_bias=False, torch_dtype="bfloat16")
    c.update(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
             num_key_value_heads=4, max_position_embeddings=2048)
    return c, h.decoder_tensors(c, h.Draw(1), LLAMA_NORMS), torch.bfloat16, 3


class Bf16Draw(h.Draw):
    """make_hf_checkpoints' draws, each rounded to BF16 as it is made: a 7B model's fp32 draws would not fit in 24 GB."""

    def normal(self, *shape, std=1.0, mean=0.0):
        return super().normal(*shape, std=std, mean=mean).to(torch.bfloat16)


def llama2_7b():  # Llama 2 7B: 32 layers, d 4096, 32 heads (no grouping), d_ff 11008, BF16
    c = h.llama_config("llama", architectures=["LlamaForCausalLM"], mlp_bias=False, torch_dtype="bfloat16")
    c.update(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
             num_key_value_heads=32, max_position_embeddings=4096)
    return c, h.decoder_tensors(c, Bf16Draw(1), LLAMA_NORMS), torch.bfloat16, 8  # 8 shards: one written at a time


MODELS = {"gpt2-small": gpt2_small, "tinyllama": tinyllama, "llama2-7b": llama2_7b}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    args = parser.parse_args()
    config, tensors, dtype, shards = MODELS[args.model]()
    folder = os.path.join(args.out, args.model)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for name in tensors:  # converted one at a time, so that no second copy of the model is made
        tensors[name] = tensors[name].to(dtype)
    h.save_checkpoint(folder, tensors, shards)
    ids = torch.randint(0, config["vocab_size"], (20000,), generator=torch.Generator().manual_seed(2))
    with open(os.path.join(folder, "ids.txt"), "w") as f:
        f.write(" ".join(map(str, ids.tolist())))
    print(folder)


if __name__ == "__main__":
    main()
