#!/usr/bin/python3
"""Independent PyTorch reference for the normlab model (docs/model.md) and
generator of the committed test fixtures under tests/fixtures/.

Run with Debian's torch:
    /usr/bin/python3 tools/torch_reference.py --out tests/fixtures

Every equation of docs/model.md is written out as explicit tensor ops (no
nn.Module layers), evaluated in float64 from float32-stored weights, so the
stored loss / logits / gradients are the exact (to ~1e-15) values for the stored
F32 weights. The C++ tests never need torch: they only read the fixtures.

Extending with more placements: add a function `step(m, i, s, h, F)` and
register it in PLACEMENTS with the norm slots it owns (see `Placement`).
"""
import argparse
import json
import math
import os
import sys
import zlib
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py  # noqa: E402

SUBLAYERS = ("attn", "ffn")


# --------------------------------------------------------------------------
# Primitive ops (one function per equation)
# --------------------------------------------------------------------------

def linear(x, w, b=None):
    """y = x Wᵀ + b, W stored [out, in]."""
    y = x @ w.t()
    return y + b if b is not None else y


def layernorm(x, g, b, eps):
    """(x - mean) / sqrt(var + eps) * g (+ b); var is the biased (1/d) variance."""
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    y = (x - mu) / torch.sqrt(var + eps) * g
    return y + b if b is not None else y


def rmsnorm(x, g, eps):
    """x / sqrt(mean(x²) + eps) * g (no bias, whatever norm.bias says)."""
    ms = (x * x).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(ms + eps) * g


def gelu_exact(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def silu(x):
    return x * torch.sigmoid(x)


def rope(x, base):
    """x: [B, H, T, D]. GPT-NeoX rotate-half: pairs (j, j + D/2), θ_j = base^(−2j/D),
    position t = 0..T-1:  (a, b) ↦ (a cos tθ_j − b sin tθ_j,  b cos tθ_j + a sin tθ_j)."""
    T, D = x.shape[-2], x.shape[-1]
    half = D // 2
    j = torch.arange(half, dtype=torch.float64)
    theta = base ** (-2.0 * j / D)                              # [D/2]
    t = torch.arange(T, dtype=torch.float64)
    ang = t[:, None] * theta[None, :]                            # [T, D/2]
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def causal_softmax_attention(q, k, v):
    """q, k, v: [B, H, T, D]. softmax(q kᵀ/√D + causal mask) v."""
    T, D = q.shape[-2], q.shape[-1]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return p @ v


# --------------------------------------------------------------------------
# Placement registry
# --------------------------------------------------------------------------

@dataclass
class Placement:
    """One normalization placement.

    step(m, i, s, h, F) -> new h: one sub-layer update of layer i (0-based),
      s in ("attn", "ffn"), F the sub-layer function (x -> branch output).
      Use m.norm(f"layers.{i}.{s}.in_norm", x) etc. to apply a norm slot.
    norm_slots: which per-sub-layer norms exist ("in_norm", "post_norm");
      each gives layers.{i}.{s}.{slot}.weight (+ .bias for LayerNorm w/ bias).
    final_norm_default: value of final_norm = "auto".
    extra_params(cfg) -> list of (name, shape, kind) for placement-specific
      parameters (e.g. ReZero's α); kind selects the random fixture init.
    """
    step: Callable
    norm_slots: Tuple[str, ...]
    final_norm_default: bool
    extra_params: Optional[Callable] = None
    doc: str = ""


def step_post(m, i, s, h, F):
    # post (Vaswani 2017): h ← Norm_post(h + F(h))
    return m.norm(f"layers.{i}.{s}.post_norm", h + F(h))


def step_pre(m, i, s, h, F):
    # pre (Xiong 2020): h ← h + F(Norm_in(h))
    return h + F(m.norm(f"layers.{i}.{s}.in_norm", h))


PLACEMENTS: Dict[str, Placement] = {
    "post": Placement(step_post, ("post_norm",), False, doc="h ← Norm_post(h + F(h))"),
    "pre": Placement(step_pre, ("in_norm",), True, doc="h ← h + F(Norm_in(h))"),
}


# --------------------------------------------------------------------------
# Config and parameter list
# --------------------------------------------------------------------------

def full_config(**over):
    """Every key of the `model` section of docs/model.md, explicit."""
    cfg = {
        "vocab_size": 61, "d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 40,
        "max_seq_len": 12,
        "norm": {"type": "layernorm", "eps": 1e-5, "bias": True},
        "placement": "pre", "final_norm": "auto", "activation": "gelu",
        "positions": "learned", "rope_base": 10000.0, "tied_embeddings": True,
        "bias": True, "dropout": 0.0,
        "init": {"scheme": "gpt2", "std": 0.02, "embed_std": 0.02},
    }
    for k, v in over.items():
        if isinstance(v, dict):
            cfg[k] = {**cfg[k], **v}
        else:
            cfg[k] = v
    return cfg


def final_norm_on(cfg):
    fn = cfg["final_norm"]
    if fn == "auto":
        return PLACEMENTS[cfg["placement"]].final_norm_default
    assert isinstance(fn, bool), fn
    return fn


def norm_has_bias(cfg):
    return cfg["norm"]["type"] == "layernorm" and bool(cfg["norm"]["bias"])


def param_specs(cfg) -> List[Tuple[str, List[int], str]]:
    """(name, shape, kind) in a fixed order; kind ∈ {embed, linear, bias, gain, norm_bias, ...}."""
    V, d, dff, L = cfg["vocab_size"], cfg["d_model"], cfg["d_ff"], cfg["n_layers"]
    pl = PLACEMENTS[cfg["placement"]]
    specs = [("embed.tokens.weight", [V, d], "embed")]
    if cfg["positions"] == "learned":
        specs.append(("embed.positions.weight", [cfg["max_seq_len"], d], "embed"))

    def lin(name, out_f, in_f):
        specs.append((name + ".weight", [out_f, in_f], "linear"))
        if cfg["bias"]:
            specs.append((name + ".bias", [out_f], "bias"))

    def norm(name):
        specs.append((name + ".weight", [d], "gain"))
        if norm_has_bias(cfg):
            specs.append((name + ".bias", [d], "norm_bias"))

    for i in range(L):
        for s in SUBLAYERS:
            for slot in pl.norm_slots:
                norm(f"layers.{i}.{s}.{slot}")
            if s == "attn":
                for p in "qkvo":
                    lin(f"layers.{i}.attn.{p}", d, d)
            else:
                lin(f"layers.{i}.ffn.fc1", dff, d)
                if cfg["activation"] == "swiglu":
                    lin(f"layers.{i}.ffn.gate", dff, d)
                lin(f"layers.{i}.ffn.fc2", d, dff)
    if pl.extra_params is not None:
        specs.extend(pl.extra_params(cfg))
    if final_norm_on(cfg):
        norm("final_norm")
    if not cfg["tied_embeddings"]:
        specs.append(("lm_head.weight", [V, d], "embed"))
    return specs


# Fixture weights: deliberately NOT the training init, so gains/biases matter.
FIXTURE_INIT = {
    "embed": lambda shape, g: 0.3 * torch.randn(shape, generator=g, dtype=torch.float64),
    "linear": lambda shape, g: 0.3 * torch.randn(shape, generator=g, dtype=torch.float64),
    "bias": lambda shape, g: 0.1 * torch.randn(shape, generator=g, dtype=torch.float64),
    "norm_bias": lambda shape, g: 0.1 * torch.randn(shape, generator=g, dtype=torch.float64),
    "gain": lambda shape, g: 1.0 + 0.1 * torch.randn(shape, generator=g, dtype=torch.float64),
}


def random_params(cfg, seed) -> Dict[str, torch.Tensor]:
    """Float32 weights, deterministic in (cfg, seed)."""
    g = torch.Generator().manual_seed(seed)
    return {name: FIXTURE_INIT[kind](shape, g).to(torch.float32)
            for name, shape, kind in param_specs(cfg)}


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------

class Model:
    """Functional model over a dict of parameters (float64 for the reference)."""

    def __init__(self, cfg, params):
        self.cfg = cfg
        self.p = params
        self.placement = PLACEMENTS[cfg["placement"]]
        assert cfg["d_model"] % cfg["n_heads"] == 0
        assert cfg.get("dropout", 0.0) == 0.0, "reference has no dropout"

    def get(self, name):
        return self.p.get(name)

    def norm(self, prefix, x):
        eps = self.cfg["norm"]["eps"]
        g = self.p[prefix + ".weight"]
        if self.cfg["norm"]["type"] == "layernorm":
            return layernorm(x, g, self.p.get(prefix + ".bias"), eps)
        if self.cfg["norm"]["type"] == "rmsnorm":
            return rmsnorm(x, g, eps)
        raise ValueError(self.cfg["norm"]["type"])

    def lin(self, prefix, x):
        return linear(x, self.p[prefix + ".weight"], self.p.get(prefix + ".bias"))

    def attn(self, i, x):
        B, T, d = x.shape
        H = self.cfg["n_heads"]
        D = d // H
        pre = f"layers.{i}.attn"
        q, k, v = (self.lin(f"{pre}.{n}", x).view(B, T, H, D).transpose(1, 2) for n in "qkv")
        if self.cfg["positions"] == "rope":
            q = rope(q, self.cfg["rope_base"])
            k = rope(k, self.cfg["rope_base"])
        o = causal_softmax_attention(q, k, v)                  # [B, H, T, D]
        o = o.transpose(1, 2).reshape(B, T, d)                  # heads concatenated
        return self.lin(f"{pre}.o", o)

    def ffn(self, i, x):
        pre = f"layers.{i}.ffn"
        if self.cfg["activation"] == "gelu":
            return self.lin(f"{pre}.fc2", gelu_exact(self.lin(f"{pre}.fc1", x)))
        if self.cfg["activation"] == "swiglu":
            return self.lin(f"{pre}.fc2", silu(self.lin(f"{pre}.gate", x)) * self.lin(f"{pre}.fc1", x))
        raise ValueError(self.cfg["activation"])

    def embed_scale(self):
        # docs/model.md writes "· embed_scale" but defines no config key for it;
        # for the placements shipped so far it is 1.
        return 1.0

    def forward(self, tokens):
        B, T = tokens.shape
        E = self.p["embed.tokens.weight"]
        h = E[tokens.long()] * self.embed_scale()
        if self.cfg["positions"] == "learned":
            h = h + self.p["embed.positions.weight"][:T][None, :, :]
        for i in range(self.cfg["n_layers"]):
            for s in SUBLAYERS:
                F = (lambda x, i=i: self.attn(i, x)) if s == "attn" else (lambda x, i=i: self.ffn(i, x))
                h = self.placement.step(self, i, s, h, F)
        if final_norm_on(self.cfg):
            h = self.norm("final_norm", h)
        W_head = E if self.cfg["tied_embeddings"] else self.p["lm_head.weight"]
        return h @ W_head.t()                                  # [B, T, V]

    def loss(self, tokens, targets):
        logits = self.forward(tokens)
        logp = torch.log_softmax(logits, dim=-1)
        nll = -logp.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
        return nll.mean(), logits


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------

CASES = {
    "pre_layernorm_gelu_learned": dict(placement="pre"),
    "post_layernorm_gelu_learned": dict(placement="post"),
    "pre_rmsnorm_swiglu_rope": dict(placement="pre", norm={"type": "rmsnorm"},
                                    activation="swiglu", positions="rope"),
    "post_rmsnorm_swiglu_rope": dict(placement="post", norm={"type": "rmsnorm"},
                                     activation="swiglu", positions="rope"),
    "pre_layernorm_nobias_gelu_rope_untied": dict(placement="pre", norm={"bias": False},
                                                  bias=False, positions="rope",
                                                  tied_embeddings=False),
    "post_layernorm_gelu_learned_finalnorm": dict(placement="post", final_norm=True),
}
BATCH, SEQ = 2, 7


def case_seed(name):
    return zlib.crc32(name.encode("utf-8"))


def make_case(name):
    cfg = full_config(**CASES[name])
    seed = case_seed(name)
    params32 = random_params(cfg, seed)
    g = torch.Generator().manual_seed(seed ^ 0x5EED)
    V = cfg["vocab_size"]
    tokens = torch.randint(0, V, (BATCH, SEQ), generator=g, dtype=torch.int64).to(torch.int32)
    targets = torch.randint(0, V, (BATCH, SEQ), generator=g, dtype=torch.int64).to(torch.int32)
    return cfg, params32, tokens, targets


def reference(cfg, params32, tokens, targets):
    """float64 forward/backward from the float32 weights."""
    p64 = {n: t.to(torch.float64).clone().requires_grad_(True) for n, t in params32.items()}
    model = Model(cfg, p64)
    loss, logits = model.loss(tokens, targets)
    grads = torch.autograd.grad(loss, list(p64.values()))
    return loss.detach(), logits.detach(), dict(zip(p64.keys(), grads)), p64


def tensor_entry(dtype, t):
    return (dtype, list(t.shape), t.detach().contiguous().view(-1).tolist())


def write_case(out_dir, name):
    cfg, params32, tokens, targets = make_case(name)
    loss, logits, grads, _ = reference(cfg, params32, tokens, targets)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model": cfg, "batch_size": BATCH, "seq_len": SEQ}, f, indent=2)
        f.write("\n")
    tensors = {}
    for n, t in params32.items():
        tensors[n] = tensor_entry("F32", t)
        tensors["grad/" + n] = tensor_entry("F64", grads[n])
    tensors["tokens"] = tensor_entry("I32", tokens)
    tensors["targets"] = tensor_entry("I32", targets)
    tensors["loss"] = ("F64", [], [loss.item()])
    tensors["logits"] = tensor_entry("F64", logits)
    path = os.path.join(d, "data.safetensors")
    safetensors_py.save(path, tensors)
    # Round-trip check of the hand-written file.
    back = safetensors_py.load(path)
    assert set(back) == set(tensors)
    for n, (dt, shape, vals) in tensors.items():
        b = back[n]
        assert b[0] == dt and b[1] == shape and len(b[2]) == len(vals), n
        if dt == "F64" or dt == "I32":
            assert b[2] == vals, n
        else:
            assert all(abs(x - y) <= 1e-7 * max(1.0, abs(y)) for x, y in zip(b[2], vals)), n
    print(f"{name}: loss={loss.item():.12f}  params={len(params32)}  "
          f"file={os.path.getsize(path)} bytes")
    return cfg


# --------------------------------------------------------------------------
# Self-checks
# --------------------------------------------------------------------------

def check_primitives():
    """Explicit ops vs torch's library implementations (independent code paths)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 5, 16, generator=g, dtype=torch.float64)
    w = 1 + 0.1 * torch.randn(16, generator=g, dtype=torch.float64)
    b = 0.1 * torch.randn(16, generator=g, dtype=torch.float64)
    e = 0.0
    e = max(e, (layernorm(x, w, b, 1e-5) - torch.nn.functional.layer_norm(x, (16,), w, b, 1e-5)).abs().max().item())
    e = max(e, (gelu_exact(x) - torch.nn.functional.gelu(x)).abs().max().item())
    e = max(e, (silu(x) - torch.nn.functional.silu(x)).abs().max().item())
    # RoPE vs. complex-number rotation of pairs (j, j+D/2)
    q = torch.randn(2, 2, 7, 8, generator=g, dtype=torch.float64)
    D = 8
    theta = 10000.0 ** (-2.0 * torch.arange(D // 2, dtype=torch.float64) / D)
    ang = torch.arange(7, dtype=torch.float64)[:, None] * theta
    z = torch.complex(q[..., :D // 2], q[..., D // 2:]) * torch.polar(torch.ones_like(ang), ang)
    e = max(e, (rope(q, 10000.0) - torch.cat([z.real, z.imag], -1)).abs().max().item())
    # attention vs. an explicit per-row loop
    k = torch.randn(2, 2, 7, 8, generator=g, dtype=torch.float64)
    v = torch.randn(2, 2, 7, 8, generator=g, dtype=torch.float64)
    o = causal_softmax_attention(q, k, v)
    for t in range(7):
        s = (q[..., t:t + 1, :] @ k[..., :t + 1, :].transpose(-1, -2)) / math.sqrt(8)
        ref = torch.softmax(s, -1) @ v[..., :t + 1, :]
        e = max(e, (o[..., t:t + 1, :] - ref).abs().max().item())
    print(f"primitive self-check: max |explicit - library| = {e:.3e}")
    assert e < 1e-12


def check_finite_differences(name, n_per_param=1, h=1e-6):
    """Autograd (float64) vs central finite differences, one or more random entries per parameter."""
    cfg, params32, tokens, targets = make_case(name)
    loss, _, grads, p64 = reference(cfg, params32, tokens, targets)
    base = {n: t.detach().clone() for n, t in p64.items()}
    gen = torch.Generator().manual_seed(123)
    worst = 0.0
    lines = []
    for n in base:
        for _ in range(n_per_param):
            idx = int(torch.randint(0, base[n].numel(), (1,), generator=gen))
            vals = []
            for sgn in (+1, -1):
                p = {k: v.clone() for k, v in base.items()}
                p[n].view(-1)[idx] += sgn * h
                with torch.no_grad():
                    vals.append(Model(cfg, p).loss(tokens, targets)[0].item())
            fd = (vals[0] - vals[1]) / (2 * h)
            ag = grads[n].view(-1)[idx].item()
            # FD rounding noise is ~eps*|loss|/h ≈ 1e-10, so judge |fd-ag| against
            # an absolute floor plus a relative part.
            err = abs(fd - ag) / (1e-8 + 1e-6 * abs(ag))
            worst = max(worst, err)
            lines.append(f"  {n:38s}[{idx:4d}] autograd={ag:+.10e} fd={fd:+.10e} |diff|={abs(fd - ag):.1e}")
    print(f"finite-difference check ({name}, h={h}):")
    print("\n".join(lines))
    print(f"  {len(lines)} entries; worst |diff| / (1e-8 + 1e-6·|autograd|) = {worst:.2e} (pass < 1)")
    assert worst < 1.0, worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures", help="output directory")
    ap.add_argument("--cases", nargs="*", default=list(CASES), help="subset of cases")
    ap.add_argument("--check-case", default="pre_layernorm_nobias_gelu_rope_untied",
                    help="case for the finite-difference check ('all' for every case)")
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)   # bitwise-stable reductions
    if not args.no_check:
        check_primitives()
        for c in (list(CASES) if args.check_case == "all" else [args.check_case]):
            check_finite_differences(c)
    for c in args.cases:
        write_case(args.out, c)


if __name__ == "__main__":
    main()
