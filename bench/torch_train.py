#!/usr/bin/python3
"""The PyTorch peer of bench/train_step.cpp: the same GPT-style Pre-LN model, the same training step.

Run with Debian's python3-torch (/usr/bin/python3, torch 1.13). One step = zero grads, forward,
backward, global-norm clip to 1.0, AdamW(lr 3e-4, betas (0.9, 0.95), eps 1e-8, wd 0.1 on matrices
and embeddings only). Prints one JSON line in the same format as normlab_bench_train.

The model follows docs/model.md: learned positions, Pre-LN blocks h += attn(LN(h)), h += ffn(LN(h)),
LayerNorm with bias (eps 1e-5), exact (erf) GELU, d_ff = 4 d, linear biases, final LayerNorm,
tied embeddings, mean cross-entropy, N(0, 0.02) weights, zero biases, unit gains. q, k and v are one
[3d, d] Linear (the usual PyTorch/nanoGPT form; the same arithmetic as three [d, d] ones, one GEMM
instead of three). torch 1.13 has no F.scaled_dot_product_attention, so attention is written out:
softmax(q k^T / sqrt(D) + causal mask) v.
"""
import argparse
import json
import math
import os
import resource
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=0, help="0 = 4 * d_model")
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--autocast-bf16", action="store_true",
                   help="forward under torch.autocast('cpu', bfloat16): bf16 matmuls, fp32 weights and optimizer")
    p.add_argument("--optimizer", choices=["foreach", "single"], default="single",
                   help="torch.optim.AdamW implementation (torch 1.13 CPU has no fused AdamW)")
    return p.parse_args()


def main():
    a = parse_args()
    # BLAS/OpenMP pools read these when the libraries load: set them before importing torch.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(a.threads))
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(a.seed)
    d, H, T, B, V, L = a.d_model, a.heads, a.seq, a.batch, a.vocab, a.layers
    d_ff = a.d_ff or 4 * d
    assert d % H == 0

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d, eps=1e-5)
            self.qkv = nn.Linear(d, 3 * d)
            self.o = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d, eps=1e-5)
            self.fc1 = nn.Linear(d, d_ff)
            self.fc2 = nn.Linear(d_ff, d)

        def forward(self, h, mask):
            b, t, _ = h.shape
            q, k, v = self.qkv(self.ln1(h)).split(d, dim=2)
            q = q.view(b, t, H, d // H).transpose(1, 2)
            k = k.view(b, t, H, d // H).transpose(1, 2)
            v = v.view(b, t, H, d // H).transpose(1, 2)
            att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d // H))
            att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
            y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
            h = h + self.o(y)
            return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))  # exact (erf) GELU is F.gelu's default

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, d)
            self.pos = nn.Embedding(T, d)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(d, eps=1e-5)
            self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1))
            for name, prm in self.named_parameters():
                if prm.dim() >= 2:
                    nn.init.normal_(prm, 0.0, 0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(prm)
                else:
                    nn.init.ones_(prm)

        def forward(self, idx, targets):
            t = idx.shape[1]
            h = self.tok(idx) + self.pos.weight[:t]
            for blk in self.blocks:
                h = blk(h, self.mask)
            logits = F.linear(self.ln_f(h), self.tok.weight)  # tied head
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    model = GPT()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, foreach=(a.optimizer == "foreach"))

    g = torch.Generator().manual_seed(a.seed ^ 0x5EED)
    stream = torch.randint(0, V, (B * T + 1,), generator=g, dtype=torch.long)
    x = stream[:-1].view(B, T).contiguous()
    y = stream[1:].view(B, T).contiguous()

    ms, cpu_ms, losses = [], [], []
    for step in range(1, a.warmup + a.steps + 1):
        t0 = time.perf_counter()
        c0 = time.process_time()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast_bf16):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lv = loss.item()
        elapsed = (time.perf_counter() - t0) * 1e3
        cpu = (time.process_time() - c0) * 1e3
        if step > a.warmup:
            ms.append(elapsed)
            cpu_ms.append(cpu)
            losses.append(lv)

    print(json.dumps({
        "impl": "torch", "threads": a.threads, "torch_threads": torch.get_num_threads(),
        # the process's peak resident set (ru_maxrss is in KiB on Linux)
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "torch_version": torch.__version__, "optimizer": a.optimizer,
        "precision": "bf16 autocast" if a.autocast_bf16 else "fp32",
        "ms_per_step": ms, "cpu_ms_per_step": cpu_ms, "tokens_per_step": B * T, "warmup": a.warmup, "loss": losses,
        "model": {"vocab": V, "d_model": d, "n_layers": L, "n_heads": H, "d_ff": d_ff, "seq": T, "batch": B},
    }, sort_keys=True))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
