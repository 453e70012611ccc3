#!/usr/bin/python3
"""Independent PyTorch reference for the normlab model (docs/model.md, docs/variants.md)
and generator of the committed test fixtures under tests/fixtures/.

Run with Debian's torch:
    /usr/bin/python3 tools/torch_reference.py --out tests/fixtures

Every equation is written out as explicit tensor ops (no nn.Module layers), evaluated
in float64 from float32-stored weights, so the stored loss / logits / gradients are the
exact (to ~1e-15) values for the stored F32 weights. The C++ tests never need torch:
they only read the fixtures.

The equations come from ../shared/spec/norm-variants.md (cited as §x.y) through the
contract docs/variants.md. Parameters are created on demand while the forward runs
(`Model.param`), so the parameter set of a configuration is whatever its forward
touches: there is no hand-maintained list to drift from the equations.

Adding a placement: write `def step(m, i, s, h)` (one sub-layer of layer i, s in
("attn", "ffn"), returning the new residual stream) or, for placements that rewire
the whole stack, `def stack(m, h)`; then add one `Placement(...)` line to PLACEMENTS
and a case to CASES.

Encoder-decoders (model.shape = "encoder_decoder", docs/model.md "Encoder-decoder:
translation"; cases encdec_*): `Model.encoder_decoder` runs the same `step` (or `stack`)
over the encoder's (attn, ffn) and the decoder's (attn, cross, ffn) sub-layers, with
`m.prefix` ("encoder." / "decoder.") in every parameter name and `m.tower` telling a step
which stack it is in (DeepNorm's α_e / α_d; `m.stack_depth()`, `m.sublayers()`). Every placement runs there; switches that exist only
in that shape are in ENCODER_DECODER_SWITCHES. The fixture also holds `source` and
`source_lengths`.

Before writing, every case is self-checked: explicit ops vs library/equivalent forms,
the Pre-LN = Pre-RMS = Pre-CRMS identity of §1.3, float64 autograd vs finite differences,
and float32 conditioning (see tests/fixtures/README.md).
"""
import argparse
import copy
import json
import math
import os
import sys
import zlib
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_py  # noqa: E402

SUBLAYERS = ("attn", "ffn")
# An encoder-decoder's decoder layer: causal self-attention, cross-attention over the encoder's output, FFN.
DECODER_SUBLAYERS = ("attn", "cross", "ffn")


# --------------------------------------------------------------------------
# Primitive ops (one function per equation)
# --------------------------------------------------------------------------

def linear(x, w, b=None):
    """y = x Wᵀ + b, W stored [out, in]."""
    y = x @ w.t()
    return y + b if b is not None else y


def layernorm(x, g, b, eps):
    """§1.1: (x - μ) / sqrt(v + ε) ⊙ γ (+ β); v is the biased (1/w) variance."""
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    y = (x - mu) / torch.sqrt(var + eps) * g
    return y + b if b is not None else y


def rmsnorm(x, g, eps):
    """§1.2: x / sqrt(mean(x²) + ε) ⊙ γ."""
    ms = (x * x).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(ms + eps) * g


def rmsnorm_gemma(x, s, eps):
    """§1.2 (Gemma): x / sqrt(mean(x²) + ε) ⊙ (1 + s)."""
    ms = (x * x).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(ms + eps) * (1.0 + s)


def scalenorm(x, g, eps):
    """§1.4: g · x / max(‖x‖₂, ε), one scalar g."""
    n = torch.sqrt((x * x).sum(dim=-1, keepdim=True))
    return g * x / torch.clamp(n, min=eps)


def dyt(x, alpha, g, b):
    """§1.5: γ ⊙ tanh(α x) + β, α one scalar."""
    y = g * torch.tanh(alpha * x)
    return y + b if b is not None else y


def crmsnorm(x, eps):
    """§1.3: x ∈ R^w is the compressed form of a zero-mean z ∈ R^(w+1);
    x / sqrt((‖x‖² + (Σx)²) / (w+1) + ε). Non-affine."""
    w = x.shape[-1]
    sq = (x * x).sum(dim=-1, keepdim=True)
    s = x.sum(dim=-1, keepdim=True)
    return x / torch.sqrt((sq + s * s) / (w + 1) + eps)


def l2_normalize(x, eps=1e-12):
    """§2.9: x / max(‖x‖₂, 1e-12) along the last axis (torch.nn.functional.normalize)."""
    n = torch.sqrt((x * x).sum(dim=-1, keepdim=True))
    return x / torch.clamp(n, min=eps)


def gelu_exact(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """GELU's tanh approximation (Hendrycks & Gimpel 2016; GPT-2's gelu_new, Gemma's gelu_pytorch_tanh)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def relu(x):
    return torch.clamp(x, min=0.0)


def sinusoids(T, w):
    """Vaswani et al. 2017 §3.5: PE[t, 2i] = sin(t / 10000^(2i/w)), PE[t, 2i+1] = cos(t / 10000^(2i/w)), [T, w]."""
    t = torch.arange(T, dtype=torch.float64)[:, None]
    two_i = (torch.arange(w) // 2 * 2).to(torch.float64)[None, :]
    angle = t / 10000.0 ** (two_i / w)
    return torch.where(torch.arange(w)[None, :] % 2 == 0, torch.sin(angle), torch.cos(angle))


def silu(x):
    return x * torch.sigmoid(x)


def softcap(z, c):
    """§2.16: c · tanh(z / c)."""
    return c * torch.tanh(z / c)


def center(x):
    """§1.3 / §2.15: x − mean(x) over the last axis."""
    return x - x.mean(dim=-1, keepdim=True)


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


def softmax_attention(q, k, v, scale=None, cap=0.0, causal=True, key_lengths=None):
    """q: [B, H, Tq, D], k, v: [B, H, Tk, D]. softmax(cap(scale · q kᵀ) + mask) v; scale defaults to 1/√D,
    cap(z) = c·tanh(z/c) when c > 0 (Gemma 2 attention soft-cap, before the mask); the mask hides
    later positions when causal (a decoder) and nothing otherwise (an encoder). key_lengths [B]
    (an encoder-decoder's source lengths) also hides the padded keys: key j of row b gets −∞ when
    j ≥ key_lengths[b] (the encoder's self-attention and the decoder's cross-attention)."""
    T, D = q.shape[-2], q.shape[-1]
    if scale is None:
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    else:
        scores = (q @ k.transpose(-1, -2)) * scale
    if cap:
        scores = softcap(scores, cap)
    if causal:
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
    if key_lengths is not None:
        Tk = k.shape[-2]
        padded = torch.arange(Tk)[None, :] >= key_lengths.long()[:, None]       # [B, Tk]
        scores = scores.masked_fill(padded[:, None, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return p @ v


# --------------------------------------------------------------------------
# Norm types (docs/variants.md "Norm types"); each creates its own parameters
# under `prefix` through m.param, so only what the type needs exists.
# --------------------------------------------------------------------------

def norm_layernorm(m, prefix, x, eps):
    w = x.shape[-1]
    g = m.param(prefix + ".weight", [w], "gain")
    b = m.param(prefix + ".bias", [w], "norm_bias") if m.cfg["norm"]["bias"] else None
    return layernorm(x, g, b, eps)


def norm_rmsnorm(m, prefix, x, eps):
    return rmsnorm(x, m.param(prefix + ".weight", [x.shape[-1]], "gain"), eps)


def norm_rmsnorm_gemma(m, prefix, x, eps):
    return rmsnorm_gemma(x, m.param(prefix + ".weight", [x.shape[-1]], "gemma_gain"), eps)


def norm_scalenorm(m, prefix, x, eps):
    return scalenorm(x, m.param(prefix + ".weight", [1], "scalenorm_gain", width=x.shape[-1]), eps)


def norm_dyt(m, prefix, x, eps):
    w = x.shape[-1]
    alpha = m.param(prefix + ".alpha", [1], "dyt_alpha")
    g = m.param(prefix + ".weight", [w], "gain")
    b = m.param(prefix + ".bias", [w], "norm_bias") if m.cfg["norm"]["bias"] else None
    return dyt(x, alpha, g, b)


def norm_crmsnorm(m, prefix, x, eps):
    return crmsnorm(x, eps)


def norm_none(m, prefix, x, eps):
    return x


NORMS = {
    "layernorm": norm_layernorm,
    "rmsnorm": norm_rmsnorm,
    "rmsnorm_gemma": norm_rmsnorm_gemma,
    "scalenorm": norm_scalenorm,
    "dyt": norm_dyt,
    "crmsnorm": norm_crmsnorm,
    "none": norm_none,
}


# --------------------------------------------------------------------------
# Placements (docs/variants.md "Placements"). Each step is one sub-layer update.
#   m.N(i, s, slot, x)  the configured norm `layers.{i}.{s}.{slot}`
#   m.F(i, s, x)        the plain sub-layer function (attention or FFN)
# --------------------------------------------------------------------------

def step_post(m, i, s, h):
    # §2.1 post: h ← Norm_post(h + F(h))
    return m.N(i, s, "post_norm", h + m.F(i, s, h))


def step_pre(m, i, s, h):
    # §2.2 pre: h ← h + F(Norm_in(h))
    return h + m.F(i, s, m.N(i, s, "in_norm", h))


def step_rezero(m, i, s, h):
    # §2.4 rezero: h ← h + α_ℓ·F(h); one α per layer unless rezero_per_sublayer
    name = f"{m.prefix}layers.{i}.{s}.rezero_alpha" if m.opt("rezero_per_sublayer") else f"{m.prefix}layers.{i}.rezero_alpha"
    return h + m.param(name, [1], "rezero_alpha") * m.F(i, s, h)


def step_plain_residual(m, i, s, h):
    # §2.5 tfixup: h ← h + F(h)
    return h + m.F(i, s, h)


def step_lipschitz(m, i, s, h):
    # §2.6 (Neutron v1 form): u = Norm_in(h); h ← u + F(u)
    u = m.N(i, s, "in_norm", h)
    return u + m.F(i, s, u)


def step_admin(m, i, s, h):
    # §2.7 admin: h ← Norm_post(ω ⊙ h + F(h)), ω a learnable [d] vector per sub-layer
    # (an encoder-decoder: every sub-layer of both stacks, cross-attention included)
    omega = m.param(f"{m.prefix}layers.{i}.{s}.admin_omega", [m.width], "admin_omega")
    return m.N(i, s, "post_norm", omega * h + m.F(i, s, h))


def step_sandwich(m, i, s, h):
    # §2.10 sandwich / §2.16 gemma2 / §2.18 peri: h ← h + Norm_out(F(Norm_in(h)))
    # (PB-relax, when on, lives inside Model.norm: it rescales every norm input.)
    return h + m.N(i, s, "out_norm", m.F(i, s, m.N(i, s, "in_norm", h)))


def step_normformer(m, i, s, h):
    # §2.11 attn: h ← h + Norm_out(HeadScale(A(Norm_in(h))))
    #       ffn:  h ← λ ⊙ h + fc2(Norm_mid(φ(fc1 Norm_in(h))))
    #       cross (an encoder-decoder): Pre-LN, as fairseq's decoder layer's encoder attention; with
    #       options.scale_cross the attention form above
    if s == "cross" and not m.opt("scale_cross"):
        return step_pre(m, i, s, h)
    x = m.N(i, s, "in_norm", h)
    if s in ("attn", "cross"):
        H = m.cfg["n_heads"]
        heads = m.attn_heads(i, x, s)                                # [B, T, H, D]
        form = m.opt("head_scale") if m.opt("scale_heads") else None
        gamma = f"{m.prefix}layers.{i}.{s}.head_scale"
        if form == "paper":    # γ_h on each head's output, before W_O
            heads = heads * m.param(gamma, [H], "unit_scale")[:, None]
        a = m.attn_out(i, heads, s)                                  # W_O (+ b_O)
        if form == "fairseq":  # W_O's output (bias included) split in H chunks, chunk h × γ_h
            B, T, w = a.shape
            g = m.param(gamma, [H], "unit_scale")
            a = (a.view(B, T, H, w // H) * g[:, None]).reshape(B, T, w)
        if m.opt("scale_attn"):
            a = m.N(i, s, "out_norm", a)
        return h + a
    u = m.ffn_hidden(i, x)                                           # φ(fc1 x) (GLU: after the product)
    if m.opt("scale_fc"):
        u = m.N(i, s, "mid_norm", u)
    f = m.ffn_out(i, u)
    if m.opt("scale_resids"):
        return m.param(f"{m.prefix}layers.{i}.ffn.resid_scale", [m.width], "unit_scale") * h + f
    return h + f


def deepnorm_alpha(m):
    """§2.12 Table 1: (2L)^(1/4) for one stack; in an encoder-decoder with N encoder and M decoder
    layers, α_e = 0.81·(N⁴M)^(1/16) in the encoder and α_d = (3M)^(1/4) in the decoder. GLM-130B
    (Zeng et al. 2022, §2.1; options.deepnorm_constants = "glm130b", one stack): α = (2L)^(1/2)."""
    if m.cfg["options"].get("deepnorm_constants", "deepnet") == "glm130b":
        assert m.tower is None, "GLM-130B's constants are for one stack"
        return (2.0 * m.cfg["n_layers"]) ** 0.5
    if m.tower == "encoder":
        N, M = m.encoder_layers(), m.cfg["n_layers"]
        return 0.81 * (N ** 4 * M) ** (1.0 / 16.0)
    if m.tower == "decoder":
        return (3.0 * m.cfg["n_layers"]) ** 0.25
    return (2.0 * m.cfg["n_layers"]) ** 0.25


def step_deepnorm(m, i, s, h):
    # §2.12 deepnorm: h ← Norm_post(α·h + F(h)), α = (2L)^(1/4) (encoder-decoder: deepnorm_alpha)
    alpha = deepnorm_alpha(m)
    return m.N(i, s, "post_norm", alpha * h + m.F(i, s, h))


def step_subln(m, i, s, h):
    # §2.13 attn: h ← h + W_O Norm_inner(MHA(Norm_in(h)))
    #       ffn:  h ← h + fc2(Norm_mid(φ(fc1 Norm_in(h))))
    #       cross: h ← h + F(Norm_in(h))   (torchscale: the inner norm only `if subln and self_attention`)
    x = m.N(i, s, "in_norm", h)
    if s == "cross":
        return h + m.F(i, s, x)
    if s == "attn":
        heads = m.attn_heads(i, x)
        B, T, H, D = heads.shape
        return h + m.attn_out(i, m.N(i, s, "inner_norm", heads.reshape(B, T, H * D)))
    return h + m.ffn_out(i, m.N(i, s, "mid_norm", m.ffn_hidden(i, x)))


def step_pre_rms(m, i, s, h):
    # §2.15 pre_rms: h ← h + center(F(RMS_in(h)))   (the embedding is centered too: see Placement.embed)
    return h + center(m.F(i, s, m.N(i, s, "in_norm", h)))


def step_olmo2(m, i, s, h):
    # §2.17 olmo2: h ← h + Norm_out(F(h))   (QK-norm over the full width: options.qk_norm = "full")
    return h + m.N(i, s, "out_norm", m.F(i, s, h))


def step_mixln(m, i, s, h):
    # §2.19 mixln: layers i < ⌊ρL⌋ are post, the others pre (an encoder-decoder: L of the layer's own stack)
    P = math.floor(m.opt("mixln_ratio") * m.stack_depth())
    return step_post(m, i, s, h) if i < P else step_pre(m, i, s, h)


def step_hybridnorm(m, i, s, h):
    # §2.20 attn: h ← h + W_O·Attn(RMS_q q, RMS_k k, RMS_v v) (per-head norms: options qk_norm
    #             "per_head" + v_norm), no input norm
    #       ffn:  u = Norm_in(h); h ← u + F(u)
    # HybridNorm* (options.star): block 0 is Pre-Norm for both sub-layers, QKV norms kept.
    # An encoder-decoder's cross-attention takes the attention form (q, k, v normed per head, no input norm).
    if m.opt("star") and i == 0:
        return step_pre(m, i, s, h)
    if s in ("attn", "cross"):
        return h + m.F(i, s, h)
    u = m.N(i, s, "in_norm", h)
    return u + m.F(i, s, u)


def step_lns(m, i, s, h):
    # §2.21 lns: h ← h + F(Norm_in(h) · 1/√ℓ), ℓ = i + 1 ("constant"); "gain_init" = plain pre forward
    x = m.N(i, s, "in_norm", h)
    if m.opt("lns_form") == "constant":
        x = x * (1.0 / math.sqrt(i + 1))
    return h + m.F(i, s, x)


def step_gpas(m, i, s, h):
    # §2.23 gpas (Pre-LN + GPAS): h ← G(h + F(Norm_in(h))), G(z) = z − SiLU(a)·sg(z)
    name = f"{m.prefix}layers.{i}.{s}.gpas_gate" if m.opt("gpas_per_sublayer") else f"{m.prefix}layers.{i}.gpas_gate"
    a = m.param(name, [1], "gpas_gate")
    z = h + m.F(i, s, m.N(i, s, "in_norm", h))
    return z - silu(a) * m.sg(z)


# Whole-stack placements ----------------------------------------------------

# The whole-stack placements run on the stack being built (Model.prefix, Model.tower): an encoder-decoder's encoder
# and decoder each have their own DLCL weights and norms, and their own ResiDual streams (§2.3, §2.14).

def stack_layers(m, h, step):
    for i in range(m.stack_depth()):
        for s in m.sublayers():
            h = step(m, i, s, h)
    return h


def dlcl_weights(m):
    L = m.stack_depth()
    # Full [L+1, L+1] matrix; only entries k ≤ l ever enter the computation.
    return m.param(f"{m.prefix}dlcl.weights", [L + 1, L + 1], "dlcl_weights")


def stack_dlcl_pre(m, h):
    # §2.3 pre-norm DLCL: x_l = Σ_{k≤l} W[l,k]·N_k(y_k), N_0 = id, N_k = dlcl.norms.{k-1};
    # y_0 = embedding output, y_{l+1} = PreLNBlock_l(x_l); output Σ_{k≤L} W[L,k]·N_k(y_k) (then final norm)
    L = m.stack_depth()
    W = dlcl_weights(m)
    ny = [h]                                              # N_k(y_k)
    for l in range(L):
        x = sum(W[l, k] * ny[k] for k in range(l + 1))
        for s in m.sublayers():
            x = step_pre(m, l, s, x)
        ny.append(m.norm(f"{m.prefix}dlcl.norms.{l}", x))
    return sum(W[L, k] * ny[k] for k in range(L + 1))


def stack_dlcl_post(m, h):
    # §2.3 post-norm DLCL: x_l = Norm_l(Σ_{k≤l} W[l,k]·y_k), Norm_l = dlcl.norms.{l-1}, none for l = 0;
    # y_{l+1} = PostLNBlock_l(x_l); output dlcl.norms.{L-1}(Σ_{k≤L} W[L,k]·y_k), no final norm
    L = m.stack_depth()
    W = dlcl_weights(m)
    y = [h]
    for l in range(L):
        x = sum(W[l, k] * y[k] for k in range(l + 1))
        if l >= 1:
            x = m.norm(f"{m.prefix}dlcl.norms.{l - 1}", x)
        for s in m.sublayers():
            x = step_post(m, l, s, x)
        y.append(x)
    return m.norm(f"{m.prefix}dlcl.norms.{L - 1}", sum(W[L, k] * y[k] for k in range(L + 1)))


def stack_residual(m, h):
    # §2.14 ResiDual: d_0 = x_0; per sub-layer f = F(x); d ← d + f; x ← Norm_post(x + f);
    # output α·x + Norm_dual(d), Norm_dual with ε = 1e-7
    # (an encoder-decoder's decoder: cross-attention is one more sub-layer of the same form)
    x, d = h, h
    for i in range(m.stack_depth()):
        for s in m.sublayers():
            f = m.F(i, s, x)
            d = d + f
            x = m.N(i, s, "post_norm", x + f)
    return m.opt("residual_alpha") * x + m.norm(f"{m.prefix}dual_norm", d, eps=1e-7)


@dataclass
class Placement:
    """One normalization placement.

    step(m, i, s, h) -> new h for one sub-layer, or stack(m, h) -> the stream before the
    final norm for placements that rewire the whole stack (exactly one of the two).
    final_norm: the value of model.final_norm = "auto".
    defaults: placement defaults for model fields (built-in < placement < user config).
    switches: the placement's own model.options keys and their defaults (a callable
      default is evaluated on the config).
    embed: extra transform of the embedding output (after positions and embed_norm).
    narrow: the residual stream has width d − 1 (pre_crms).
    late_switches: switches added after fixtures were written, with their defaults: accepted, but a resolved
      config holds one only when it is set to another value (as normlab writes them), so earlier configs stay.
    """
    final_norm: bool
    step: Optional[Callable] = None
    stack: Optional[Callable] = None
    defaults: Dict = field(default_factory=dict)
    switches: Dict = field(default_factory=dict)
    embed: Optional[Callable] = None
    narrow: bool = False
    spec: str = ""
    late_switches: Dict = field(default_factory=dict)


def qk_scale_init(cfg):
    T = cfg["max_seq_len"]
    return math.log2(T * T - T)


RMS6 = {"norm": {"type": "rmsnorm", "eps": 1e-6}}

PLACEMENTS: Dict[str, Placement] = {
    "post": Placement(False, step_post, spec="§2.1"),
    "pre": Placement(True, step_pre, spec="§2.2"),
    "dlcl_pre": Placement(True, stack=stack_dlcl_pre, spec="§2.3"),
    "dlcl_post": Placement(False, stack=stack_dlcl_post, spec="§2.3"),
    "rezero": Placement(False, step_rezero, defaults={"norm": {"type": "none"}},
                        switches={"rezero_per_sublayer": False}, spec="§2.4"),
    # fairseq's decoder multiplies the token embedding by √d (embed_scale = sqrt(embed_dim)), T-Fixup keeps it
    "tfixup": Placement(False, step_plain_residual, defaults={"norm": {"type": "none"}, "embed_scale": "sqrt_d"},
                        spec="§2.5"),
    "lipschitz": Placement(True, step_lipschitz, defaults={"norm": {"eps": 1e-6}}, spec="§2.6"),
    # fairseq conventions (Admin's code): √d-scaled embeddings N(0, d^-1/2), Xavier matrices
    "admin": Placement(False, step_admin, defaults={"embed_scale": "sqrt_d",
                                                    "init": {"scheme": "xavier", "embed_std": 0.0}},
                       switches={"admin_omega": "log"}, spec="§2.7"),
    "scalenorm": Placement(True, step_pre, defaults={"norm": {"type": "scalenorm"}}, spec="§2.8"),
    "qknorm": Placement(True, step_pre, defaults={"options": {"qk_norm": "l2"}},
                        # 0 = log2(T² − T) (qk_scale_init above), as normlab writes the default; an init value
                        # only: the fixture draws attn.qk_scale itself
                        switches={"qk_scale_init": 0.0}, spec="§2.9"),
    "sandwich": Placement(True, step_sandwich, switches={"pb_relax": False}, spec="§2.10"),
    "normformer": Placement(True, step_normformer,
                            switches={"head_scale": "paper", "scale_attn": True, "scale_heads": True,
                                      "scale_fc": True, "scale_resids": True}, spec="§2.11"),
    "deepnorm": Placement(False, step_deepnorm, switches={"deepnorm_init": "paper"}, spec="§2.12",
                          late_switches={"deepnorm_constants": "deepnet"}),
    "subln": Placement(True, step_subln, spec="§2.13"),
    "residual": Placement(False, stack=stack_residual, switches={"residual_alpha": 1.0}, spec="§2.14"),
    "pre_rms": Placement(True, step_pre_rms, defaults={"norm": {"type": "rmsnorm"}}, embed=center,
                         spec="§2.15"),
    "pre_crms": Placement(True, step_pre, defaults={"norm": {"type": "crmsnorm"}, "tied_embeddings": False},
                          narrow=True, spec="§2.15"),
    "gemma2": Placement(True, step_sandwich,
                        defaults={"norm": {"type": "rmsnorm_gemma", "eps": 1e-6}, "embed_scale": "sqrt_d",
                                  "activation": "geglu", "bias": False,
                                  "options": {"attn_softcap": 50.0, "final_softcap": 30.0}}, spec="§2.16"),
    "olmo2": Placement(True, step_olmo2,
                       defaults={**RMS6, "activation": "swiglu", "bias": False,
                                 "options": {"qk_norm": "full"}}, spec="§2.17"),
    "peri": Placement(True, step_sandwich, spec="§2.18"),
    # Mix-LN's LLaMA code: untied embeddings, RoPE
    "mixln": Placement(True, step_mixln, defaults={**RMS6, "init": {"embed_std": math.sqrt(2.0 / 5.0)},
                                                   "tied_embeddings": False, "positions": "rope"},
                       switches={"mixln_ratio": 0.25}, spec="§2.19"),
    "hybridnorm": Placement(True, step_hybridnorm,
                            defaults={"norm": {"type": "rmsnorm", "eps": 1e-5},
                                      "options": {"qk_norm": "per_head", "v_norm": True}},
                            switches={"star": False}, spec="§2.20"),
    "hybridnorm_star": Placement(True, step_hybridnorm,
                                 defaults={"norm": {"type": "rmsnorm", "eps": 1e-5},
                                           "options": {"qk_norm": "per_head", "v_norm": True}},
                                 switches={"star": True}, spec="§2.20"),
    "lns": Placement(True, step_lns, defaults=RMS6, switches={"lns_form": "constant"}, spec="§2.21"),
    # unit-variance embeddings N(0, d^-1/2)·√d (the DyT LLaMA code scales the embedding by a scalar √d)
    "dyt": Placement(True, step_pre, defaults={"norm": {"type": "dyt"}, "embed_scale": "sqrt_d",
                                               "init": {"embed_std": 0.0}},
                     # per-slot 0 = dyt_alpha, as normlab writes the defaults; init values only (the fixture
                     # draws every .alpha itself)
                     switches={"dyt_alpha": 0.5, "dyt_alpha_attn": 0.0, "dyt_alpha_ffn": 0.0,
                               "dyt_alpha_final": 0.0}, spec="§2.22"),
    "gpas": Placement(True, step_gpas, defaults=RMS6, switches={"gpas_per_sublayer": False}, spec="§2.23"),
}


# --------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------

# Built-in defaults of every model key (docs/model.md + docs/variants.md model-level switches).
BUILTIN = {
    "shape": "decoder", "vocab_size": 61, "d_model": 16, "n_layers": 2, "n_heads": 2, "d_ff": 40, "max_seq_len": 12,
    "norm": {"type": "layernorm", "eps": 1e-5, "bias": True},
    "placement": "pre", "final_norm": "auto", "embed_norm": False, "embed_scale": "none",
    "activation": "gelu", "positions": "learned", "rope_base": 10000.0, "tied_embeddings": True,
    "bias": True, "dropout": 0.0,
    "init": {"scheme": "gpt2", "std": 0.02, "embed_std": 0.02},
    "options": {},
}
# model.options switches that exist for every placement.
MODEL_OPTIONS = {"qk_norm": "none", "v_norm": False, "attn_softcap": 0.0, "final_softcap": 0.0, "qkv_bias": False}
# shape = "encoder_decoder" (docs/model.md "Encoder-decoder"): the switches placements have only in that shape
# (deepnorm_beta is init-only: the fixtures draw their own weights).
ENCODER_DECODER_SWITCHES = {"deepnorm": {"deepnorm_beta": "paper"}, "normformer": {"scale_cross": False}}


def merge(base, over):
    """Deep merge of nested dicts; `over` wins, key order of `base` kept, new keys appended."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def resolve(user):
    """Fully explicit model config: built-in < placement defaults < user; final_norm as a bool,
    options holding every model-level switch plus the placement's own switches."""
    pl = PLACEMENTS[user.get("placement", BUILTIN["placement"])]
    cfg = merge(merge(BUILTIN, pl.defaults), user)
    switches = dict(pl.switches)
    if cfg["shape"] == "encoder_decoder":
        switches.update(ENCODER_DECODER_SWITCHES.get(cfg["placement"], {}))
        # N, written resolved (0 = n_layers); ε of the label-smoothed loss
        cfg["encoder_layers"] = cfg.get("encoder_layers", 0) or cfg["n_layers"]
        cfg.setdefault("label_smoothing", 0.0)
    opts = merge(MODEL_OPTIONS, switches)
    opts = merge(opts, pl.defaults.get("options", {}))
    opts = merge(opts, user.get("options", {}))
    unknown = set(opts) - set(MODEL_OPTIONS) - set(switches) - set(pl.late_switches)
    assert not unknown, f"unknown options for {cfg['placement']}: {sorted(unknown)}"
    cfg["options"] = {k: (v(cfg) if callable(v) else v) for k, v in opts.items()
                      if k not in pl.late_switches or v != pl.late_switches[k]}
    if cfg["final_norm"] == "auto":
        cfg["final_norm"] = pl.final_norm
    assert isinstance(cfg["final_norm"], bool)
    return cfg


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------

class Model:
    """Functional model. Parameters live in self.p (name -> tensor); m.param(name, shape, kind)
    returns an existing parameter or, with a `factory`, creates it (kind selects the random
    fixture init). Without a factory a missing name is an error, and after the forward
    `unused()` lists provided parameters the forward never touched.

    m.sg(x) is stop-gradient. For finite-difference checks the values it returned in a
    base run can be replayed (`frozen`), so FD differentiates the same function autograd does."""

    def __init__(self, cfg, params, factory=None, frozen=None):
        self.cfg = resolve(cfg)
        self.p = params
        self.factory = factory
        self.used = set()
        self.placement = PLACEMENTS[self.cfg["placement"]]
        self.frozen, self.sg_values = frozen, []
        # Encoder-decoder state while a stack runs: the parameter prefix ("encoder." / "decoder."; "" for a
        # one-stack model), which stack (None for a one-stack model), the source lengths (padded keys) and
        # the encoder's output (the cross-attention's keys and values).
        self.prefix, self.tower, self.key_lengths, self.memory = "", None, None, None
        d = self.cfg["d_model"]
        self.width = d - 1 if self.placement.narrow else d      # residual-stream width
        assert d % self.cfg["n_heads"] == 0
        assert self.cfg["dropout"] == 0.0, "reference has no dropout"

    # -- parameters and helpers ---------------------------------------------
    def param(self, name, shape, kind, **init_args):
        if name not in self.p:
            if self.factory is None:
                raise KeyError(f"missing parameter {name}")
            self.p[name] = self.factory(name, list(shape), kind, init_args)
        t = self.p[name]
        assert list(t.shape) == list(shape), (name, list(t.shape), shape)
        self.used.add(name)
        return t

    def unused(self):
        return sorted(set(self.p) - self.used)

    def opt(self, key):
        return self.cfg["options"][key]

    def encoder_layers(self):
        """N of an encoder-decoder (encoder_layers, 0 = n_layers)."""
        return self.cfg.get("encoder_layers", 0) or self.cfg["n_layers"]

    def stack_depth(self):
        """L of the stack being run: N in an encoder-decoder's encoder, else n_layers."""
        return self.encoder_layers() if self.tower == "encoder" else self.cfg["n_layers"]

    def sublayers(self):
        """The sub-layers of one layer of the stack being run (cross-attention in an encoder-decoder's decoder)."""
        return DECODER_SUBLAYERS if self.tower == "decoder" else SUBLAYERS

    def run_stack(self, h):
        """The stack being run, before its final norm: the placement's stack function or its layer loop."""
        if self.placement.stack is not None:
            return self.placement.stack(self, h)
        return stack_layers(self, h, self.placement.step)

    def sg(self, x):
        if self.frozen is not None:
            v = self.frozen[len(self.sg_values)]
        else:
            v = x.detach().clone()
        self.sg_values.append(v)
        return v

    def norm(self, prefix, x, eps=None):
        """The configured norm (model.norm) under `prefix`; PB-relax (§2.10, options.pb_relax)
        first divides the input by max|x|/8 over the whole tensor, detached."""
        if self.cfg["options"].get("pb_relax", False):
            x = x / (self.sg(x.abs().max()) / 8.0)
        eps = self.cfg["norm"]["eps"] if eps is None else eps
        return NORMS[self.cfg["norm"]["type"]](self, prefix, x, eps)

    def N(self, i, s, slot, x):
        return self.norm(f"{self.prefix}layers.{i}.{s}.{slot}", x)

    def lin(self, prefix, x, out_features, bias=None):
        """x W^T (+ b); the bias per model.bias unless `bias` says otherwise (Qwen2's q, k, v)."""
        w = self.param(prefix + ".weight", [out_features, x.shape[-1]], "linear")
        b = self.param(prefix + ".bias", [out_features], "bias") if (self.cfg["bias"] if bias is None else bias) \
            else None
        return linear(x, w, b)

    # -- sub-layer functions -----------------------------------------------
    def attn_heads(self, i, x, s="attn"):
        """Attention up to (not including) W_O: x [B,T,w] -> per-head outputs [B,T,H,D].
        s = "cross" (an encoder-decoder's decoder): q from x, k and v from the encoder's output
        (self.memory), no causal mask, no RoPE, the source's padded keys masked."""
        c = self.cfg
        B, T, _ = x.shape
        d, H = c["d_model"], c["n_heads"]
        D = d // H
        pre = f"{self.prefix}layers.{i}.{s}"
        cross = s == "cross"
        qkn = c["options"]["qk_norm"]
        qkv_bias = c["bias"] or c["options"]["qkv_bias"]
        kv_in = self.memory if cross else x
        q = self.lin(f"{pre}.q", x, d, bias=qkv_bias)
        k, v = (self.lin(f"{pre}.{n}", kv_in, d, bias=qkv_bias) for n in "kv")
        if qkn == "full":       # over the whole projected width d, before the head split and RoPE
            q, k = self.norm(f"{pre}.q_norm", q), self.norm(f"{pre}.k_norm", k)
        q, k, v = (t.view(B, t.shape[1], H, D).transpose(1, 2) for t in (q, k, v))     # [B, H, T, D]
        if qkn == "per_head":   # over each head's D coordinates, before RoPE
            q, k = self.norm(f"{pre}.q_norm", q), self.norm(f"{pre}.k_norm", k)
        if c["options"]["v_norm"]:
            v = self.norm(f"{pre}.v_norm", v)
        scale = None
        if qkn == "l2":         # q̂ = q/‖q‖, k̂ = k/‖k‖ per head; logits g·q̂k̂ᵀ (no 1/√D)
            q, k = l2_normalize(q), l2_normalize(k)
            scale = self.param(f"{pre}.qk_scale", [1], "qk_scale")
        if c["positions"] == "rope" and not cross:   # across sequences positions do not compare
            q, k = rope(q, c["rope_base"]), rope(k, c["rope_base"])
        if self.tower is None:
            causal, key_lengths = c["shape"] == "decoder", None
        else:   # encoder: bidirectional, padded source keys masked; decoder: causal self, masked cross
            causal = self.tower == "decoder" and not cross
            key_lengths = None if causal else self.key_lengths
        o = softmax_attention(q, k, v, scale, c["options"]["attn_softcap"], causal=causal, key_lengths=key_lengths)
        return o.transpose(1, 2)                                             # [B, T, H, D]

    def attn_out(self, i, heads, s="attn"):
        """Heads concatenated [B,T,d] (or already [B,T,d]), then W_O (+ b_O) to the stream width."""
        x = heads.reshape(heads.shape[0], heads.shape[1], -1)
        return self.lin(f"{self.prefix}layers.{i}.{s}.o", x, self.width)

    def ffn_hidden(self, i, x):
        """φ(fc1 x) [B,T,d_ff]; for GLU forms the product act(gate x) ⊙ fc1 x."""
        pre, dff, act = f"{self.prefix}layers.{i}.ffn", self.cfg["d_ff"], self.cfg["activation"]
        plain = {"gelu": gelu_exact, "gelu_tanh": gelu_tanh, "relu": relu}
        gated = {"swiglu": silu, "geglu": gelu_exact, "geglu_tanh": gelu_tanh}
        if act in plain:
            return plain[act](self.lin(f"{pre}.fc1", x, dff))
        if act in gated:
            return gated[act](self.lin(f"{pre}.gate", x, dff)) * self.lin(f"{pre}.fc1", x, dff)
        raise ValueError(act)

    def ffn_out(self, i, u):
        return self.lin(f"{self.prefix}layers.{i}.ffn.fc2", u, self.width)

    def F(self, i, s, x):
        if s in ("attn", "cross"):
            return self.attn_out(i, self.attn_heads(i, x, s), s)
        return self.ffn_out(i, self.ffn_hidden(i, x))

    # -- model --------------------------------------------------------------
    def embed(self, tokens, side=""):
        """E[tokens] (× the embedding scale) (+ P[t]) (embed_norm) (the placement's entry transform).
        side: "encoder." / "decoder." in an encoder-decoder, whose sides have their own learned positions
        (`<side>embed.positions.weight`) and share the token table `embed.tokens.weight`."""
        c = self.cfg
        T = tokens.shape[1]
        V, d, w = c["vocab_size"], c["d_model"], self.width
        E = self.param("embed.tokens.weight", [V, w], "embed")
        h = E[tokens.long()]
        if c["embed_scale"] == "sqrt_d":
            h = h * math.sqrt(d)
        elif c["embed_scale"] == "learned":
            h = h * self.param("embed.scale", [1], "embed_scale", width=d)
        else:
            assert c["embed_scale"] == "none", c["embed_scale"]
        if c["positions"] == "learned":
            h = h + self.param(f"{side}embed.positions.weight", [c["max_seq_len"], w], "embed")[:T][None, :, :]
        elif c["positions"] == "sinusoidal":
            h = h + sinusoids(T, w)[None, :, :].to(h.dtype)
        if c["embed_norm"]:
            h = self.norm("embed_norm", h)
        if self.placement.embed is not None:
            h = self.placement.embed(h)
        return h

    def encoder_decoder(self, tokens, source):
        """docs/model.md "Encoder-decoder: translation" (Vaswani et al. 2017): the encoder (N layers of attn,
        ffn; bidirectional, the source's padded keys masked) over the source, its final norm when the
        placement has one (the memory); the decoder (M layers of causal attn, cross over the memory, ffn)
        over the target tokens, its final norm. Returns the decoder's output stream."""
        c = self.cfg
        assert source is not None, "an encoder-decoder needs a source (ids, lengths)"
        # Not written for two stacks in docs/model.md: refused here rather than guessed.
        assert not c["embed_norm"] and c["embed_scale"] != "learned", "no per-side embed_norm / embed.scale"
        ids, lengths = source
        self.key_lengths = lengths
        self.prefix, self.tower = "encoder.", "encoder"
        s = self.run_stack(self.embed(ids, "encoder."))
        if c["final_norm"]:
            s = self.norm("encoder.final_norm", s)
        self.memory = s
        self.prefix, self.tower = "decoder.", "decoder"
        h = self.run_stack(self.embed(tokens, "decoder."))
        if c["final_norm"]:
            h = self.norm("decoder.final_norm", h)
        self.prefix, self.tower, self.key_lengths, self.memory = "", None, None, None
        return h

    def forward(self, tokens, source=None):
        c = self.cfg
        V, w = c["vocab_size"], self.width
        if c["shape"] == "encoder_decoder":
            h = self.encoder_decoder(tokens, source)
        else:
            h = self.run_stack(self.embed(tokens))
            if c["final_norm"]:
                h = self.norm("final_norm", h)
        E = self.param("embed.tokens.weight", [V, w], "embed")
        W_head = E if c["tied_embeddings"] else self.param("lm_head.weight", [V, w], "embed")
        logits = h @ W_head.t()                                  # [B, T, V]
        if c["options"]["final_softcap"]:
            logits = softcap(logits, c["options"]["final_softcap"])
        return logits

    def loss(self, tokens, targets, source=None):
        """Mean cross-entropy over the positions with a target; −1 marks a position without one (an
        encoder's unmasked tokens, an encoder-decoder's target padding), as torch's ignore_index.
        label_smoothing ε: the target distribution (1 − ε)·one-hot + ε/V (torch's label_smoothing).
        source: (ids [B,T], lengths [B]) of an encoder-decoder."""
        logits = self.forward(tokens, source)
        eps = self.cfg.get("label_smoothing", 0.0)
        if eps:
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     targets.long().reshape(-1), ignore_index=-1,
                                                     label_smoothing=eps)
        else:
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     targets.long().reshape(-1), ignore_index=-1)
        return loss, logits


# --------------------------------------------------------------------------
# Fixture weights: deliberately NOT the training init, so every parameter matters.
# --------------------------------------------------------------------------

def _n(shape, g):
    return torch.randn(shape, generator=g, dtype=torch.float64)


FIXTURE_INIT = {
    "embed": lambda shape, g: 0.3 * _n(shape, g),
    "linear": lambda shape, g, std=0.3: std * _n(shape, g),
    "bias": lambda shape, g: 0.1 * _n(shape, g),
    "norm_bias": lambda shape, g: 0.1 * _n(shape, g),
    "gain": lambda shape, g: 1.0 + 0.1 * _n(shape, g),
    "gemma_gain": lambda shape, g: 0.1 * _n(shape, g),
    "scalenorm_gain": lambda shape, g, width: math.sqrt(width) * (1.0 + 0.1 * _n(shape, g)),
    "dyt_alpha": lambda shape, g: 0.5 + 0.1 * _n(shape, g),
    "rezero_alpha": lambda shape, g: 0.5 + 0.1 * _n(shape, g),
    "gpas_gate": lambda shape, g: 0.5 * _n(shape, g),
    "qk_scale": lambda shape, g: 3.0 * (1.0 + 0.1 * _n(shape, g)),
    "embed_scale": lambda shape, g, width: math.sqrt(width) * (1.0 + 0.1 * _n(shape, g)),
    "admin_omega": lambda shape, g: 1.5 + 0.1 * _n(shape, g),
    "unit_scale": lambda shape, g: 1.0 + 0.1 * _n(shape, g),
    # row l ≈ 1/(l+1) (the avg init) plus noise; the whole matrix is drawn, entries k > l stay unused
    "dlcl_weights": lambda shape, g: 1.0 / (1.0 + torch.arange(shape[0], dtype=torch.float64))[:, None]
    + 0.05 * _n(shape, g),
}


def seeded_factory(case, salt=0, linear_std=0.3):
    """Parameter `name` of case `case` ~ FIXTURE_INIT[kind], seeded by crc32("<case>/<name>")
    (crc32("<case>~<salt>/<name>") for salt > 0), rounded to float32 (returned as float64
    holding the float32 value)."""
    kinds = {}
    key = case if salt == 0 else f"{case}~{salt}"

    def make(name, shape, kind, init_args):
        g = torch.Generator().manual_seed(zlib.crc32(f"{key}/{name}".encode("utf-8")))
        kinds[name] = (shape, kind)
        if kind == "linear" and linear_std != 0.3:
            init_args = {**init_args, "std": linear_std}
        return FIXTURE_INIT[kind](shape, g, **init_args).to(torch.float32).to(torch.float64)

    make.kinds = kinds
    return make


# --------------------------------------------------------------------------
# Training init rules, from the papers and their code (spec §2.5, §2.17, §2.20, §2.22), written with
# torch.nn.init; the fixture init_rules.json records the moments of what they draw, and
# tests/model/init_rules_test.cpp compares normlab's init of the same configs against them.
# --------------------------------------------------------------------------

INIT_SIZES = dict(vocab_size=256, d_model=256, n_layers=2, n_heads=4, d_ff=1024, max_seq_len=64,
                  tied_embeddings=False)
INIT_PLACEMENTS = ["tfixup", "olmo2", "hybridnorm", "dyt"]
# Encoder-decoder init rules (keyed by case name; the placement is in the config): T-Fixup's two-stack factors.
# N = 16 against M = 2: the encoder's 0.67·N^(-1/4) = 0.335 is far from the decoder's (9M)^(-1/4) = 0.486, beyond the
# comparison's 3% tolerance, so a swapped or shared factor fails.
# HybridNorm's σ/√(2L) on o and fc2 per stack: 1/√32 (encoder) against 1/√4 (decoder), so a shared L fails.
INIT_ENCDEC = {"tfixup_encdec": {"placement": "tfixup", "shape": "encoder_decoder", "encoder_layers": 16},
               "hybridnorm_encdec": {"placement": "hybridnorm", "shape": "encoder_decoder", "encoder_layers": 16}}


def _role(name):
    if name.split(".")[-3:-1] in (["embed", "tokens"], ["embed", "positions"]) and name.endswith(".weight"):
        return "embedding"
    if name == "lm_head.weight":
        return "head"
    parts = name.split(".")
    if len(parts) >= 4 and parts[-1] == "weight" and parts[-2] in ("q", "k", "v", "o", "fc1", "gate", "fc2"):
        return parts[-2]
    return None


def paper_init(placement, cfg, name, shape):
    """One matrix or embedding drawn by `placement`'s training init (None: not a matrix)."""
    role = _role(name)
    if role is None:
        return None
    d, L = cfg["d_model"], cfg["n_layers"]
    t = torch.empty(shape, dtype=torch.float64)
    if placement == "tfixup":
        # Huang et al. 2020 / layer6ai-labs T-Fixup on fairseq: Xavier-uniform (gain 1 after undoing V's
        # 1/√2), embeddings N(0, d^-1/2); decoder: v, out_proj, fc1, fc2 × (9M)^(-1/4), embeddings too.
        # Encoder-decoder (fixup_initialization): encoder v, out_proj, fc1, fc2 × 0.67 N^(-1/4), its embeddings
        # × (9N)^(-1/4); the decoder's as above, cross-attention included; embeddings shared by both stacks (the
        # token table) take the encoder's factor only.
        if role == "embedding":
            torch.nn.init.normal_(t, 0.0, d ** -0.5)
        else:
            torch.nn.init.xavier_uniform_(t)
        encoder = cfg["shape"] == "encoder_decoder" and not name.startswith("decoder.")
        N = cfg.get("encoder_layers", L)
        if role == "embedding":
            t *= (9.0 * N) ** -0.25 if encoder else (9.0 * L) ** -0.25
        elif role in ("v", "o", "fc1", "gate", "fc2"):
            t *= 0.67 * N ** -0.25 if encoder else (9.0 * L) ** -0.25
    elif placement == "olmo2":
        # OLMo 2: init_fn normal, std 0.02 for every weight, truncated at ±3σ, no depth scaling
        torch.nn.init.trunc_normal_(t, 0.0, 0.02, -0.06, 0.06)
    elif placement == "hybridnorm":
        # HybridNorm full_megatron: truncated normal ±3σ, σ = √(2/(5d)); out projections σ/√(2L);
        # embeddings σ; an untied head 1/√d. Encoder-decoder: L is the depth of the projection's own stack.
        sigma = math.sqrt(2.0 / (5.0 * d))
        if role in ("o", "fc2"):
            depth = cfg.get("encoder_layers", L) if name.startswith("encoder.") else L
            sigma /= math.sqrt(2.0 * depth)
        elif role == "head":
            sigma = d ** -0.5
        torch.nn.init.trunc_normal_(t, 0.0, sigma, -3 * sigma, 3 * sigma)
    elif placement == "dyt":
        # DyT on the GPT-2 base: matrices N(0, 0.02); embeddings unit variance at the input,
        # N(0, d^-1/2) stored and × √d in the forward (the LLaMA code's √d embedding scalar)
        torch.nn.init.normal_(t, 0.0, d ** -0.5 if role == "embedding" else 0.02)
    else:
        raise ValueError(placement)
    return t


def init_moments(t):
    x = t.flatten()
    c = x - x.mean()
    m2 = (c * c).mean()
    return {"std": m2.sqrt().item(), "max_abs": x.abs().max().item(), "kurtosis": ((c ** 4).mean() / m2 ** 2).item()}


def write_init_fixture(out_dir):
    out = {"sizes": INIT_SIZES, "placements": {}}
    cases = {p: {"placement": p} for p in INIT_PLACEMENTS} | INIT_ENCDEC
    for case, over in cases.items():
        cfg = resolve({**INIT_SIZES, **over})
        placement = cfg["placement"]
        factory = seeded_factory("init/" + case)
        params = {}
        with torch.no_grad():
            tokens = torch.zeros((1, 4), dtype=torch.int32)
            model = Model(cfg, params, factory)
            if cfg["shape"] == "encoder_decoder":
                model.loss(tokens, tokens, source=(tokens, torch.full((1,), 4, dtype=torch.int32)))
            else:
                model.loss(tokens, tokens)
        stats = {}
        for name in sorted(params):
            # torch.nn.init takes no generator in torch 1.13: the global one, seeded per parameter
            torch.manual_seed(zlib.crc32(f"init/{case}/{name}".encode("utf-8")))
            t = paper_init(placement, cfg, name, list(params[name].shape))
            if t is not None:
                stats[name] = init_moments(t)
        out["placements"][case] = {"config": cfg, "params": stats}
    path = os.path.join(out_dir, "init_rules.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"init_rules.json: {', '.join(cases)}")


def legacy_order(name):
    """Parameter order of the first fixture generator (pre/post only): embeddings, then per layer
    and sub-layer the norm slot followed by the linears (weight before bias), final norm, head."""
    parts = name.split(".")
    leaf = lambda s: ("weight", "bias").index(s)  # noqa: E731
    if name == "embed.tokens.weight":
        return (0,)
    if name == "embed.positions.weight":
        return (1,)
    if parts[0] == "layers":
        mods = ("in_norm", "post_norm", "q", "k", "v", "o", "fc1", "gate", "fc2")
        return (2, int(parts[1]), SUBLAYERS.index(parts[2]), mods.index(parts[3]), leaf(parts[4]))
    if parts[0] == "final_norm":
        return (3, leaf(parts[1]))
    assert name == "lm_head.weight", name
    return (4,)


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------

@dataclass
class Case:
    model: Dict            # config overrides (resolved and written fully explicit unless legacy)
    batch: int = 2
    seq: int = 6
    legacy: bool = False   # first six fixtures: config written as given, weights drawn in one
                           # sequence from crc32(case) in legacy_order (keeps them byte-identical)
    salt: int = 0          # weight re-draw, chosen once (--find-salts) so that no gradient tensor
                           # is ill-conditioned in float32 (see check_float32)
    linear_std: float = 0.3  # std of the random linear weights
    source_lengths: Optional[list] = None  # encoder-decoder: the source length of each row (the rest is padding)
    target_lengths: Optional[list] = None  # encoder-decoder: the targets of each row (−1 after them)


LEGACY_SIZES = dict(vocab_size=61, d_model=16, n_layers=2, n_heads=2, d_ff=40, max_seq_len=12)
TINY = dict(vocab_size=41, d_model=16, n_layers=4, n_heads=2, d_ff=32, max_seq_len=12)


def legacy(**over):
    cfg = {**LEGACY_SIZES, "norm": {"type": "layernorm", "eps": 1e-5, "bias": True}, "placement": "pre",
           "final_norm": "auto", "activation": "gelu", "positions": "learned", "rope_base": 10000.0,
           "tied_embeddings": True, "bias": True, "dropout": 0.0,
           "init": {"scheme": "gpt2", "std": 0.02, "embed_std": 0.02}}
    return Case(merge(cfg, over), batch=2, seq=7, legacy=True)


def variant(placement, salt=0, linear_std=0.3, **over):
    return Case(merge({**TINY, "placement": placement}, over), salt=salt, linear_std=linear_std)


CASES: Dict[str, Case] = {
    "pre_layernorm_gelu_learned": legacy(placement="pre"),
    "post_layernorm_gelu_learned": legacy(placement="post"),
    "pre_rmsnorm_swiglu_rope": legacy(placement="pre", norm={"type": "rmsnorm"},
                                      activation="swiglu", positions="rope"),
    "post_rmsnorm_swiglu_rope": legacy(placement="post", norm={"type": "rmsnorm"},
                                       activation="swiglu", positions="rope"),
    "pre_layernorm_nobias_gelu_rope_untied": legacy(placement="pre", norm={"bias": False}, bias=False,
                                                    positions="rope", tied_embeddings=False),
    "post_layernorm_gelu_learned_finalnorm": legacy(placement="post", final_norm=True),
}
# One case per placement with that placement's defaults ...
for _p in PLACEMENTS:
    CASES[f"variant_{_p}"] = variant(_p)
# ... except the Gemma-2 soft-caps, lowered so that tanh is far from linear at these sizes.
CASES["variant_gemma2"] = variant("gemma2", options={"attn_softcap": 5.0, "final_softcap": 3.0})
# ... and T-Fixup's norm-free stack with linear weights N(0, 0.2²): at 0.3 each sub-layer roughly
# doubles the stream (loss ≈ 34, logits in the hundreds) and float32 cannot reproduce the gradients.
CASES["variant_tfixup"] = variant("tfixup", linear_std=0.2)
CASES.update({
    "variant_normformer_fairseq": variant("normformer", options={"head_scale": "fairseq"}),
    "variant_rezero_per_sublayer": variant("rezero", options={"rezero_per_sublayer": True}),
    # No final norm here: the last FFN gate feeds a scale-invariant RMSNorm, so its exact gradient
    # is ~1e-7 (ε-suppressed) and cannot be compared in float32; variant_gpas keeps the final norm.
    "variant_gpas_per_sublayer": variant("gpas", final_norm=False, options={"gpas_per_sublayer": True}),
    # eps 0.1 so that LN(x / c) ≠ LN(x) measurably: with ε = 1e-5 PB-relax would be invisible at 1e-5.
    "variant_sandwich_pbrelax": variant("sandwich", norm={"eps": 0.1}, options={"pb_relax": True}),
    "variant_pre_qk_full": variant("pre", positions="rope", options={"qk_norm": "full"}),
    "variant_pre_qk_per_head_vnorm": variant("pre", positions="rope",
                                             options={"qk_norm": "per_head", "v_norm": True}),
    "variant_pre_scalenorm_norm": variant("pre", norm={"type": "scalenorm"}),
    "variant_pre_dyt_bias": variant("pre", norm={"type": "dyt", "bias": True}),
    "variant_dyt_nobias": variant("dyt", norm={"bias": False}),
    "variant_pre_embed_norm_learned_scale": variant("pre", embed_norm=True, embed_scale="learned"),
    "variant_pre_rmsnorm_gemma": variant("pre", norm={"type": "rmsnorm_gemma"}),
    "variant_post_geglu": variant("post", activation="geglu"),
    # Vaswani et al.'s FFN and positions: ReLU, fixed sinusoids added to the √d-scaled embedding
    "variant_post_relu_sinusoidal": variant("post", activation="relu", positions="sinusoidal",
                                            embed_scale="sqrt_d"),
    "variant_pre_gelu_tanh": variant("pre", activation="gelu_tanh"),
    # GLM-130B's DeepNorm pair (§2.1): α = (2L)^(1/2) = √8 here
    "variant_deepnorm_glm130b": variant("deepnorm", options={"deepnorm_constants": "glm130b"}),
})
# The real models' norm choices (normlab --preset NAME), written here from each model's paper and released
# config.json, not from normlab's preset table: tests/model/preset_test.cpp requires normlab's preset, at these
# tiny sizes, to resolve to the same config, and the model to match this reference's numbers.
PRESETS = {
    # Radford et al. 2019; gpt2 config.json: layer_norm_epsilon 1e-5, tied, biases; model.py: 1/sqrt(2L) on c_proj.
    # activation_function gelu_new: GELU's tanh approximation.
    "gpt2": {"placement": "pre", "final_norm": True, "norm": {"type": "layernorm", "eps": 1e-5, "bias": True},
             "activation": "gelu_tanh", "positions": "learned", "tied_embeddings": True, "bias": True,
             "init": {"scheme": "scaled", "std": 0.02, "embed_std": 0.02}},
    # Devlin et al. 2019; bert-base-uncased: a bidirectional encoder (masked LM), Post-LN, LayerNorm(eps 1e-12) on the
    # embeddings, gelu, tied MLM decoder.
    "bert": {"shape": "encoder", "placement": "post", "final_norm": False, "embed_norm": True,
             "norm": {"type": "layernorm", "eps": 1e-12, "bias": True}, "activation": "gelu",
             "positions": "learned", "tied_embeddings": True, "bias": True},
    # Touvron et al. 2023 (Llama 2); Llama-2-7b-hf: RMSNorm eps 1e-5, silu gated MLP, rope_theta 1e4, untied, no bias.
    "llama": {"placement": "pre", "final_norm": True, "norm": {"type": "rmsnorm", "eps": 1e-5},
              "activation": "swiglu", "positions": "rope", "rope_base": 10000.0, "tied_embeddings": False,
              "bias": False},
    # Qwen2 report; Qwen2-0.5B: RMSNorm eps 1e-6, rope_theta 1e6, tied, bias on q_proj/k_proj/v_proj only.
    "qwen2": {"placement": "pre", "final_norm": True, "norm": {"type": "rmsnorm", "eps": 1e-6},
              "activation": "swiglu", "positions": "rope", "rope_base": 1000000.0, "tied_embeddings": True,
              "bias": False, "options": {"qkv_bias": True}},
    # DeepSeek LLM 2024; deepseek-llm-7b-base: the Llama recipe with RMSNorm eps 1e-6.
    "deepseek": {"placement": "pre", "final_norm": True, "norm": {"type": "rmsnorm", "eps": 1e-6},
                 "activation": "swiglu", "positions": "rope", "rope_base": 10000.0, "tied_embeddings": False,
                 "bias": False},
    # Zeng et al. 2022 (GLM-130B) §2.1: DeepNorm, GeGLU, rotary positions; LayerNorm with bias.
    "glm": {"placement": "deepnorm", "norm": {"type": "layernorm", "eps": 1e-5, "bias": True},
            "activation": "geglu", "positions": "rope", "rope_base": 10000.0, "tied_embeddings": True, "bias": True},
    # Gemma 2 report; gemma-2-2b: pre+post RMSNorm with (1 + w) scale, eps 1e-6, soft-caps 50/30, sqrt(d) embedding,
    # hidden_activation gelu_pytorch_tanh (GeGLU with GELU's tanh form).
    "gemma2": {"placement": "gemma2", "final_norm": True, "norm": {"type": "rmsnorm_gemma", "eps": 1e-6},
               "embed_scale": "sqrt_d", "activation": "geglu_tanh", "positions": "rope", "rope_base": 10000.0,
               "tied_embeddings": True, "bias": False, "options": {"attn_softcap": 50.0, "final_softcap": 30.0}},
    # OLMo 2 (2025); OLMo-2-1124-7B: RMSNorm after each sub-layer, q/k RMSNorm over the full width, rope_theta 5e5.
    "olmo2": {"placement": "olmo2", "final_norm": True, "norm": {"type": "rmsnorm", "eps": 1e-6},
              "activation": "swiglu", "positions": "rope", "rope_base": 500000.0, "tied_embeddings": False,
              "bias": False, "options": {"qk_norm": "full"}},
    # Vaswani et al. 2017 (Attention Is All You Need), the base model: §3.1 Post-LN encoder-decoder with N = 6 layers
    # a side, §3.3 ReLU FFN, §3.4 shared embeddings and pre-softmax matrix, embeddings × √d, §3.5 sinusoids, §5.4
    # dropout 0.1 and label smoothing 0.1. fairseq's init (the paper has none): Xavier-uniform, embeddings d^-1/2.
    "vaswani": {"shape": "encoder_decoder", "n_layers": 6, "placement": "post", "final_norm": False,
                "norm": {"type": "layernorm", "eps": 1e-5, "bias": True}, "embed_scale": "sqrt_d",
                "activation": "relu", "positions": "sinusoidal", "tied_embeddings": True, "bias": True,
                "dropout": 0.1, "label_smoothing": 0.1,
                "init": {"scheme": "xavier", "xavier": "uniform", "embed_std": 0.0}},
}
# Encoders (model.shape = encoder: bidirectional attention, a masked-LM loss over the positions with a target)
# under the placements of Xiong's BERT and the machine-translation comparisons.
for _p in ("post", "pre", "deepnorm", "admin"):
    CASES[f"encoder_{_p}"] = variant(_p, shape="encoder")
for _name, _model in PRESETS.items():
    # Gemma 2's caps lowered as in variant_gemma2, so that tanh is far from linear at these sizes; the fixtures
    # evaluate without dropout (Vaswani's 0.1 is training's); an encoder-decoder with 2 layers a side and the
    # padded source of the encdec cases below.
    _over = {"gemma2": {"options": {"attn_softcap": 5.0, "final_softcap": 3.0}},
             "vaswani": {"dropout": 0.0}}.get(_name, {})
    _case = Case(merge(merge({**TINY}, _model), _over))
    if _case.model.get("shape") == "encoder_decoder":
        _case.model["n_layers"] = 2
        _case.source_lengths, _case.target_lengths = [3, 6], [6, 4]
    CASES[f"preset_{_name}"] = _case

# Encoder-decoders (model.shape = encoder_decoder, docs/model.md "Encoder-decoder: translation"): unequal stacks
# (N = 3 encoder layers, M = 2 decoder layers), a padded source (row 0 has length 3: keys 3..5 are masked in the
# encoder's self-attention and the decoder's cross-attention, and hold random ids so that a missing mask shows),
# target padding −1 (row 1's last two positions) and label smoothing 0.1 except in encdec_pre. encdec_pre_rms_rope
# adds RoPE (self-attention only: none in cross-attention) and Pre-RMSNorm's centering on both sides.
ENCDEC = dict(TINY, shape="encoder_decoder", n_layers=2, encoder_layers=3)


def encdec(placement, salt=0, linear_std=0.3, **over):
    return Case(merge({**ENCDEC, "placement": placement}, over), salt=salt, linear_std=linear_std,
                source_lengths=[3, 6], target_lengths=[6, 4])


CASES.update({
    "encdec_post": encdec("post", label_smoothing=0.1),
    "encdec_pre": encdec("pre"),
    "encdec_deepnorm": encdec("deepnorm", salt=1, label_smoothing=0.1),
    "encdec_admin": encdec("admin", salt=1, label_smoothing=0.1),
    "encdec_tfixup": encdec("tfixup", linear_std=0.2, label_smoothing=0.1),  # norm-free: as variant_tfixup
    "encdec_pre_rms_rope": encdec("pre_rms", positions="rope", label_smoothing=0.1),
})
# Every other placement, each in the same setting (N = 3, M = 2, a padded source, ε = 0.1):
# qknorm, olmo2 and gemma2 put their QK-norm and soft-cap into cross-attention too; Mix-LN at ρ = 0.67 has 2
# Post-LN layers of the encoder's 3 and 1 of the decoder's 2 (one L for both stacks would give 1 and 1); Sub-LN has
# no inner norm in cross-attention; Sandwich has Peri-LN's sub-layer form (its init, per stack, is not drawn here).
# DLCL and ResiDual keep one combination / one pair of streams per stack; HybridNorm's per-head QKV norms reach
# cross-attention; NormFormer's cross-attention is Pre-LN unless scale_cross (here with fairseq's HeadScale);
# Pre-CRMSNorm's cross-attention reads the compressed memory (width d − 1).
for _p in ("dyt", "gemma2", "gpas", "lipschitz", "mixln", "olmo2", "peri", "qknorm", "rezero", "scalenorm", "lns",
           "subln", "sandwich", "dlcl_pre", "dlcl_post", "residual", "normformer", "hybridnorm", "hybridnorm_star",
           "pre_crms"):
    CASES[f"encdec_{_p}"] = encdec(_p, label_smoothing=0.1,
                                   **({"options": {"mixln_ratio": 0.67}} if _p == "mixln" else {}))
CASES["encdec_normformer_scale_cross"] = encdec("normformer", label_smoothing=0.1,
                                                options={"scale_cross": True, "head_scale": "fairseq"})
# Vaswani et al.'s ReLU and sinusoids under Pre-LN, with the unequal stacks (each side adds the sinusoids of its own
# positions); the Post-LN form is preset_vaswani.
CASES["encdec_pre_relu_sinusoidal"] = encdec("pre", activation="relu", positions="sinusoidal", label_smoothing=0.1)

# Weight re-draws chosen with --find-salts (salt 0 left a gradient that is small by cancellation,
# e.g. a scalar gain, with float32 relative error above FP32_SEARCH).
for _c, _s in {"variant_scalenorm": 2, "variant_qknorm": 1, "variant_subln": 1, "variant_hybridnorm": 1,
               "variant_gpas": 1, "variant_normformer_fairseq": 4, "variant_pre_scalenorm_norm": 1,
               "variant_post_geglu": 2, "variant_dyt_nobias": 1, "encdec_dyt": 3, "encdec_gpas": 1,
               "encdec_qknorm": 7, "encdec_scalenorm": 9, "encdec_normformer": 7, "encdec_hybridnorm": 1, "encdec_pre_crms": 1,
               "encdec_normformer_scale_cross": 17}.items():
    CASES[_c].salt = _s


def case_seed(name):
    return zlib.crc32(name.encode("utf-8"))


def case_config(name):
    case = CASES[name]
    return copy.deepcopy(case.model) if case.legacy else resolve(case.model)


def make_case(name):
    """(written config, float32 params, tokens, targets, source) of a case; source is (ids [B,T],
    lengths [B]) for an encoder-decoder, None otherwise."""
    case = CASES[name]
    cfg = case_config(name)
    seed = case_seed(name)
    g = torch.Generator().manual_seed(seed ^ 0x5EED)
    V = resolve(cfg)["vocab_size"]
    tokens = torch.randint(0, V, (case.batch, case.seq), generator=g, dtype=torch.int64).to(torch.int32)
    targets = torch.randint(0, V, (case.batch, case.seq), generator=g, dtype=torch.int64).to(torch.int32)
    source = None
    if resolve(cfg)["shape"] == "encoder":   # a masked LM predicts some positions only: −1 elsewhere
        targets[torch.rand((case.batch, case.seq), generator=g) < 0.6] = -1
        targets[0, 0] = 1                     # at least one position counts
    if resolve(cfg)["shape"] == "encoder_decoder":
        # Random ids everywhere, the padding included, so that an unmasked padded key would change the result;
        # the target padding (after each row's target length) is −1, as the pair loader writes it.
        ids = torch.randint(0, V, (case.batch, case.seq), generator=g, dtype=torch.int64).to(torch.int32)
        lengths = torch.tensor(case.source_lengths, dtype=torch.int32)
        assert lengths.shape == (case.batch,) and 1 <= lengths.min() and lengths.max() <= case.seq
        for b, n in enumerate(case.target_lengths):
            targets[b, n:] = -1
        source = (ids, lengths)
    # The parameter set is whatever the forward asks for.
    factory = seeded_factory(name, case.salt, case.linear_std)
    params = {}
    with torch.no_grad():
        Model(cfg, params, factory).loss(tokens, targets, source)
    if case.legacy:
        gen = torch.Generator().manual_seed(seed)
        params = {n: FIXTURE_INIT[factory.kinds[n][1]](factory.kinds[n][0], gen)
                  for n in sorted(params, key=legacy_order)}
    params32 = {n: t.to(torch.float32) for n, t in params.items()}
    return cfg, params32, tokens, targets, source


def reference(cfg, params32, tokens, targets, source=None):
    """float64 forward/backward from the float32 weights."""
    p64 = {n: t.to(torch.float64).clone().requires_grad_(True) for n, t in params32.items()}
    model = Model(cfg, p64)
    loss, logits = model.loss(tokens, targets, source)
    assert not model.unused(), f"parameters the forward never used: {model.unused()}"
    grads = torch.autograd.grad(loss, list(p64.values()))
    return loss.detach(), logits.detach(), dict(zip(p64.keys(), grads)), p64, model.sg_values


def tensor_entry(dtype, t):
    return (dtype, list(t.shape), t.detach().contiguous().view(-1).tolist())


def write_case(out_dir, name):
    cfg, params32, tokens, targets, source = make_case(name)
    loss, logits, grads, _, _ = reference(cfg, params32, tokens, targets, source)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model": cfg, "batch_size": tokens.shape[0], "seq_len": tokens.shape[1]}, f, indent=2)
        f.write("\n")
    tensors = {}
    for n, t in params32.items():
        tensors[n] = tensor_entry("F32", t)
        tensors["grad/" + n] = tensor_entry("F64", grads[n])
    tensors["tokens"] = tensor_entry("I32", tokens)
    tensors["targets"] = tensor_entry("I32", targets)
    if source is not None:
        tensors["source"] = tensor_entry("I32", source[0])
        tensors["source_lengths"] = tensor_entry("I32", source[1])
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
    size = os.path.getsize(path) + os.path.getsize(os.path.join(d, "config.json"))
    print(f"{name}: loss={loss.item():.12f}  params={len(params32)}  size={size} bytes")
    return size


# --------------------------------------------------------------------------
# Self-checks
# --------------------------------------------------------------------------

def check_primitives():
    """Explicit ops vs torch library functions / equivalent forms (independent code paths)."""
    F = torch.nn.functional
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 5, 16, generator=g, dtype=torch.float64)
    w = 1 + 0.1 * torch.randn(16, generator=g, dtype=torch.float64)
    b = 0.1 * torch.randn(16, generator=g, dtype=torch.float64)
    errs = {}
    errs["layernorm"] = (layernorm(x, w, b, 1e-5) - F.layer_norm(x, (16,), w, b, 1e-5)).abs().max()
    errs["gelu"] = (gelu_exact(x) - F.gelu(x)).abs().max()
    errs["gelu_tanh"] = (gelu_tanh(x) - F.gelu(x, approximate="tanh")).abs().max()
    errs["relu"] = (relu(x) - F.relu(x)).abs().max()
    # the sinusoids vs. the exp-log form of the frequencies (the PyTorch tutorial's), even and odd widths
    for width in (16, 7):
        freq = torch.exp(-math.log(10000.0) * torch.arange(0, width, 2, dtype=torch.float64) / width)
        pos = torch.arange(9, dtype=torch.float64)[:, None]
        pe = torch.zeros(9, width, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq[:width // 2])
        errs[f"sinusoids {width}"] = (sinusoids(9, width) - pe).abs().max()
    errs["silu"] = (silu(x) - F.silu(x)).abs().max()
    errs["l2"] = (l2_normalize(x) - F.normalize(x, dim=-1)).abs().max()
    # RMSNorm = LayerNorm of a zero-mean input; ScaleNorm = RMSNorm · g/√w when ε → 0
    xc = x - x.mean(-1, keepdim=True)
    errs["rmsnorm"] = (rmsnorm(xc, w, 1e-5) - F.layer_norm(xc, (16,), w, None, 1e-5)).abs().max()
    errs["rmsnorm_gemma"] = (rmsnorm_gemma(x, w - 1, 1e-5) - rmsnorm(x, w, 1e-5)).abs().max()
    errs["scalenorm"] = (scalenorm(x, 2.5, 1e-12) - rmsnorm(x, 2.5 / 4.0, 0.0)).abs().max()
    # §1.3: CRMSNorm of the compressed zero-mean z equals the first w coordinates of LN(z) = RMSNorm(z)
    errs["crmsnorm"] = (crmsnorm(xc[..., :15], 1e-5) - F.layer_norm(xc, (16,), None, None, 1e-5)[..., :15]).abs().max()
    errs["dyt"] = (dyt(x, 0.7, w, b) - (torch.tanh(0.7 * x) * w + b)).abs().max()
    # RoPE vs. complex-number rotation of pairs (j, j+D/2)
    q = torch.randn(2, 2, 7, 8, generator=g, dtype=torch.float64)
    D = 8
    theta = 10000.0 ** (-2.0 * torch.arange(D // 2, dtype=torch.float64) / D)
    ang = torch.arange(7, dtype=torch.float64)[:, None] * theta
    z = torch.complex(q[..., :D // 2], q[..., D // 2:]) * torch.polar(torch.ones_like(ang), ang)
    errs["rope"] = (rope(q, 10000.0) - torch.cat([z.real, z.imag], -1)).abs().max()
    # attention vs. an explicit per-row loop (with scale and soft-cap)
    k = torch.randn(2, 2, 7, 8, generator=g, dtype=torch.float64)
    v = torch.randn(2, 2, 7, 8, generator=g, dtype=torch.float64)
    e = 0.0
    for scale, cap in ((None, 0.0), (2.0, 1.5)):
        o = softmax_attention(q, k, v, scale, cap)
        sc = 1 / math.sqrt(8) if scale is None else scale
        for t in range(7):
            s = (q[..., t:t + 1, :] @ k[..., :t + 1, :].transpose(-1, -2)) * sc
            if cap:
                s = cap * torch.tanh(s / cap)
            ref = torch.softmax(s, -1) @ v[..., :t + 1, :]
            e = max(e, (o[..., t:t + 1, :] - ref).abs().max().item())
    errs["attention"] = torch.tensor(e)
    # an encoder's attention: every row sees every key
    full = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(8), -1) @ v
    errs["bidirectional attention"] = (softmax_attention(q, k, v, causal=False) - full).abs().max()
    # key-padding mask (an encoder-decoder's source): queries of one sequence (Tq = 5) over the keys of another
    # (Tk = 7) of lengths [3, 7], vs. softmax over the first len[b] keys only, row by row
    qx = torch.randn(2, 2, 5, 8, generator=g, dtype=torch.float64)
    lens = torch.tensor([3, 7], dtype=torch.int32)
    o = softmax_attention(qx, k, v, causal=False, key_lengths=lens)
    e = 0.0
    for b in range(2):
        n = int(lens[b])
        ref = torch.softmax((qx[b] @ k[b, :, :n].transpose(-1, -2)) / math.sqrt(8), -1) @ v[b, :, :n]
        e = max(e, (o[b] - ref).abs().max().item())
    errs["key-masked attention"] = torch.tensor(e)
    # label smoothing (Szegedy et al. 2016): the mean over targets ≠ −1 of −Σ_j q_j log p_j with
    # q = (1 − ε)·one-hot + ε/V, written out, vs. torch's cross_entropy(label_smoothing = ε, ignore_index = −1)
    z = torch.randn(9, 11, generator=g, dtype=torch.float64)
    tg = torch.randint(0, 11, (9,), generator=g)
    tg[[2, 5]] = -1
    keep = tg >= 0
    qd = 0.9 * F.one_hot(tg[keep], 11).to(torch.float64) + 0.1 / 11
    ls = -(qd * torch.log_softmax(z[keep], -1)).sum(-1).mean()
    errs["label smoothing"] = (F.cross_entropy(z, tg, ignore_index=-1, label_smoothing=0.1) - ls).abs()
    # GPAS: forward (1 − SiLU(a))·z, gradient w.r.t. z the identity (§1.6)
    a = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    zz = x.clone().requires_grad_(True)
    y = zz - silu(a) * zz.detach()
    y.backward(w.expand_as(y))
    errs["gpas"] = max((y - (1 - F.silu(a)) * x).abs().max(), (zz.grad - w.expand_as(y)).abs().max())
    dsilu = torch.sigmoid(a) * (1 + a * (1 - torch.sigmoid(a)))
    errs["gpas_da"] = (a.grad - (-dsilu * (w * x).sum())).abs().max() / (w * x).sum().abs()
    worst = max(v.item() for v in errs.values())
    print("primitive self-check: max |explicit - reference| = "
          + ", ".join(f"{k} {v.item():.1e}" for k, v in errs.items()))
    assert worst < 1e-12, errs


def check_equivalences():
    """Model-level identities of §1.3 / §2.15, end to end: with unit gains, Pre-LN (no β) equals
    Pre-RMSNorm (writers re-centred on the fly), and equals Pre-CRMSNorm after the §1.3 weight
    conversion (re-centre the writers, drop their last output coordinate, fold the dropped
    coordinate into the consumers: W' = W[:, :d−1] − W[:, d−1]·1ᵀ)."""
    base = {**TINY, "tied_embeddings": False, "positions": "learned"}
    pre = resolve({**base, "placement": "pre", "norm": {"type": "layernorm", "bias": False}})
    pre_rms = resolve({**base, "placement": "pre_rms"})
    pre_crms = resolve({**base, "placement": "pre_crms"})
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, TINY["vocab_size"], (2, 6))
    p = {}
    with torch.no_grad():
        Model(pre, p, seeded_factory("equivalence")).loss(tokens, tokens)
    p = {n: (torch.ones_like(t) if "norm" in n else t) for n, t in p.items()}
    d = TINY["d_model"]
    c = {}
    for n, t in p.items():
        if "norm" in n:
            continue
        writer = n.startswith("embed.") or ".attn.o." in n or ".ffn.fc2." in n
        consumer = n.endswith(("attn.q.weight", "attn.k.weight", "attn.v.weight", "fc1.weight",
                               "gate.weight")) or n == "lm_head.weight"
        if writer and t.dim() == 2 and n.startswith("embed."):
            t = center(t)[:, :d - 1]                       # rows are written vectors
        elif writer and t.dim() == 2:
            t = (t - t.mean(0, keepdim=True))[:d - 1]      # W [out=d, in]: centre over the output axis
        elif writer:
            t = center(t)[:d - 1]                          # bias
        elif consumer:
            t = t[:, :d - 1] - t[:, d - 1:]
        c[n] = t
    with torch.no_grad():
        l_pre = Model(pre, dict(p)).loss(tokens, tokens)[0].item()
        l_rms = Model(pre_rms, dict(p)).loss(tokens, tokens)[0].item()
        l_crms = Model(pre_crms, c).loss(tokens, tokens)[0].item()
    e = max(abs(l_rms - l_pre), abs(l_crms - l_pre))
    print(f"equivalence self-check: Pre-LN {l_pre:.15f}, Pre-RMS {l_rms:.15f}, Pre-CRMS {l_crms:.15f}")
    assert e < 1e-12, e


def check_finite_differences(name, n_per_param=2, h=1e-6, verbose=False):
    """Autograd (float64) vs central finite differences, n random entries per parameter.
    Stop-gradient values (GPAS, PB-relax) are replayed from the base run, so FD differentiates
    the function autograd differentiates."""
    cfg, params32, tokens, targets, source = make_case(name)
    loss, _, grads, p64, sg_values = reference(cfg, params32, tokens, targets, source)
    base = {n: t.detach().clone() for n, t in p64.items()}
    gen = torch.Generator().manual_seed(123)
    worst, lines = 0.0, []
    for n in sorted(base):
        for _ in range(n_per_param):
            idx = int(torch.randint(0, base[n].numel(), (1,), generator=gen))
            vals = []
            for sgn in (+1, -1):
                p = {k: v.clone() for k, v in base.items()}
                p[n].view(-1)[idx] += sgn * h
                with torch.no_grad():
                    vals.append(Model(cfg, p, frozen=sg_values).loss(tokens, targets, source)[0].item())
            fd = (vals[0] - vals[1]) / (2 * h)
            ag = grads[n].view(-1)[idx].item()
            # FD rounding noise is ~eps*|loss|/h ≈ 1e-10, so judge |fd-ag| against
            # an absolute floor plus a relative part.
            err = abs(fd - ag) / (1e-8 + 1e-6 * abs(ag))
            worst = max(worst, err)
            lines.append(f"  {n:38s}[{idx:4d}] autograd={ag:+.10e} fd={fd:+.10e} |diff|={abs(fd - ag):.1e}")
    if verbose:
        print("\n".join(lines))
    print(f"finite differences {name}: {len(lines)} entries, worst |diff|/(1e-8 + 1e-6·|autograd|) "
          f"= {worst:.2e} (pass < 1)")
    assert worst < 1.0, (name, worst)


FP32_SEARCH, FP32_LIMIT = 3e-6, 5e-6


def check_float32(name, limit=FP32_LIMIT, quiet=False):
    """Conditioning of a fixture: the same forward/backward in float32 (torch) vs the float64
    reference, with the C++ test's metric (relative L2 error per tensor; its tolerance is 1e-5).
    A gradient that is small only by cancellation (typically a scalar parameter) has a large
    relative float32 error, which no float32 engine could match to 1e-5; such a fixture is
    rejected here (limit) and its weights re-drawn with another Case.salt (--find-salts)."""
    cfg, params32, tokens, targets, source = make_case(name)
    loss, logits, grads, _, _ = reference(cfg, params32, tokens, targets, source)
    p32 = {n: t.clone().requires_grad_(True) for n, t in params32.items()}
    loss32, logits32 = Model(cfg, p32).loss(tokens, targets, source)
    g32 = dict(zip(p32, torch.autograd.grad(loss32, list(p32.values()))))

    def rel(a, b):
        b = b.to(torch.float64)
        return ((a.to(torch.float64) - b).norm() / max(b.norm().item(), 1e-30)).item()
    errs = {"loss": rel(loss32, loss), "logits": rel(logits32, logits)}
    errs.update({n: rel(g32[n], grads[n]) for n in grads if grads[n].norm() > 1e-12})
    worst = max(errs, key=errs.get)
    if not quiet:
        print(f"float32 conditioning {name}: worst relative error {errs[worst]:.1e} ({worst})")
    if limit is not None:
        assert errs[worst] <= limit, (f"{name}: {worst} has float32 relative error {errs[worst]:.1e} > "
                                      f"{limit:.0e}; choose another salt (--find-salts)")
    return errs[worst]


def find_salts(cases):
    """For each case, the first salt whose weights pass check_float32 at FP32_SEARCH."""
    for c in cases:
        if CASES[c].legacy:
            continue
        old = CASES[c].salt
        for salt in range(100):
            CASES[c].salt = salt
            e = check_float32(c, limit=None, quiet=True)
            if e <= FP32_SEARCH:
                break
        print(f"{c}: salt {salt} (worst float32 relative error {e:.1e}; current salt {old})")
        CASES[c].salt = old


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures", help="output directory")
    ap.add_argument("--cases", nargs="*", default=list(CASES), help="subset of cases")
    ap.add_argument("--check-case", default="all",
                    help="case for the finite-difference check ('all': every case written)")
    ap.add_argument("--fd-per-param", type=int, default=2, help="FD entries per parameter")
    ap.add_argument("--verbose", action="store_true", help="print every FD entry")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--init-rules", action="store_true",
                    help="write only init_rules.json (the training init rules' moments) and exit")
    ap.add_argument("--find-salts", action="store_true",
                    help="print, per case, the first weight salt passing the float32 check, and exit")
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return
    if args.find_salts:
        torch.set_num_threads(1)
        find_salts(args.cases)
        return
    torch.set_num_threads(1)   # bitwise-stable reductions
    if args.init_rules:
        write_init_fixture(args.out)
        return
    if not args.no_check:
        check_primitives()
        check_equivalences()
        for c in (args.cases if args.check_case == "all" else [args.check_case]):
            check_finite_differences(c, args.fd_per_param, verbose=args.verbose)
            check_float32(c)
    total = sum(write_case(args.out, c) for c in args.cases)
    print(f"{len(args.cases)} cases, {total} bytes")
    if args.cases == list(CASES):
        write_init_fixture(args.out)


if __name__ == "__main__":
    main()
