#!/usr/bin/python3
"""Take a normlab model to PyTorch: the module for its config (every placement, norm type, switch and preset, built
by the independent reference in tools/torch_reference.py, not from normlab's code) with its weights. It reads an
export (`normlab export --run R --out E`: model.safetensors, config.json, tokenizer.model; docs/model.md "Export"),
which needs nothing else, or a run directory (config.json, checkpoint.safetensors, whose AdamW moments are
skipped). No name map is needed: normlab's tensor names are the reference's parameter names (docs/model.md).

    import sys; sys.path.insert(0, "tools")
    from to_torch import load
    model = load("exports/pre")              # or a run: load("runs/pre"); a torch.nn.Module with the weights
    logits = model(tokens)                   # tokens: integer tensor [B, T] -> logits [B, T, V]
    loss, logits = model.loss(tokens, targets)

An encoder-decoder run (model.shape = "encoder_decoder", docs/model.md "Encoder-decoder: translation") also takes
the encoder's input: the source ids [B, T_s] (padded; any ids in the padding) and each row's source length [B]
(its ids and EOS; the positions from it on are masked out of the encoder's self-attention and the decoder's
cross-attention). tokens are then the decoder's input (EOS y1 ... yn) and targets its targets (-1 after them):

    model = load_run("runs/mt")
    logits = model(tokens, source, source_lengths)                  # -> [B, T, V]
    loss, logits = model.loss(tokens, targets, source, source_lengths)   # label-smoothed (model.label_smoothing)

Check that the module computes what normlab computes, on the run's own checkpoint:

    build/normlab eval --run runs/pre --batches 1 --logits /tmp/logits.safetensors
    /usr/bin/python3 tools/to_torch.py runs/pre --check /tmp/logits.safetensors        # or the export's directory

(for an encoder-decoder the file also holds the batch's source and source_lengths, which the check feeds in).

PyTorch's own modules: `load_torch_nn(path)` (`--nn`) puts a Post-LN or Pre-LN model with LayerNorm, biases and a
ReLU or GELU FFN into torch.nn.Transformer (an encoder-decoder) or torch.nn.TransformerEncoder (an encoder; a decoder
with a causal mask), norm_first = (placement == "pre"), q, k and v packed into each nn.MultiheadAttention's
in_proj_weight; the token embedding (× √d), the positions and the head are normlab's, around it. Its forward takes
the same arguments; `--nn --check FILE` compares its logits with normlab's.

Use Debian's python3 with python3-torch (scripts/setup.sh --with-torch). Inference only: dropout is left out
(as in normlab's evaluation).
"""
import argparse
import json
import math
import os
import struct
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402

# normlab writes every model-level switch into config.json; these only set initial values, which the
# checkpoint's weights replace, so the reference does not take them. (deepnorm_beta, DeepNorm's β_e rule, is
# init-only too; normlab writes it for every DeepNorm model, the reference takes it for an encoder-decoder only.)
INIT_ONLY_OPTIONS = {"qk_scale_init", "dyt_alpha", "dyt_alpha_attn", "dyt_alpha_ffn", "dyt_alpha_final",
                     "deepnorm_beta"}
DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64}
EXPORT_FORMAT = "normlab-export-v2"


def export_checksum(header, data):
    """data_crc32 as normlab export writes it: CRC-32 over every tensor's bytes, one after another in name order."""
    crc = 0
    for name in sorted(header):
        begin, end = header[name]["data_offsets"]
        crc = zlib.crc32(data[begin:end], crc)
    return f"{crc:08x}"


def read_safetensors(path, checked=False):
    """name -> tensor (and the metadata), read with the standard library and torch.frombuffer. checked: the file is
    an export's model.safetensors, whose data_crc32 must match its tensors."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        data = f.read()
    meta = header.pop("__metadata__", {})
    if checked and meta.get("data_crc32") != export_checksum(header, data):
        raise ValueError(f"{path}: the tensors do not match the checksum in its metadata (data_crc32 "
                         f"{meta.get('data_crc32', 'missing')}): the export is damaged; export the run again")
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if info["dtype"] not in DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, which this loader does not read")
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[info["dtype"]]) if end > begin else \
            torch.zeros(0, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out, meta


def reference_config(model_config):
    """normlab's resolved model config as the reference takes it. An encoder-decoder's own keys
    (encoder_layers, label_smoothing) pass through: the reference reads them."""
    cfg = json.loads(json.dumps(model_config))
    placement = ref.PLACEMENTS.get(cfg["placement"])
    if placement is None:
        raise ValueError(f"placement {cfg['placement']!r} is not in tools/torch_reference.py")
    known = set(ref.MODEL_OPTIONS) | set(placement.switches) | set(placement.late_switches)
    if cfg.get("shape") == "encoder_decoder":
        known |= set(ref.ENCODER_DECODER_SWITCHES.get(cfg["placement"], {}))
    options = {}
    for key, value in cfg.get("options", {}).items():
        if key in known:
            options[key] = value
        elif (key == "pb_relax" and not value) or key in INIT_ONLY_OPTIONS:
            continue
        else:
            raise ValueError(f"option {key} = {value!r} on placement {cfg['placement']} is not in the reference")
    cfg["options"] = options
    cfg["dropout"] = 0.0
    return cfg


class NormlabModel(torch.nn.Module):
    """A normlab model in PyTorch: the reference's equations over the checkpoint's weights.

    forward(tokens[, source, source_lengths]) -> logits [B, T, V];
    loss(tokens, targets[, source, source_lengths]) -> (mean cross-entropy over targets != -1, logits).
    source [B, T_s] and source_lengths [B] are an encoder-decoder's (required there, refused elsewhere)."""

    def __init__(self, model_config, weights, dtype=torch.float32):
        super().__init__()
        self.config = reference_config(model_config)
        self.names = sorted(weights)
        # ParameterDict keys cannot hold '.': the checkpoint names are kept in self.names.
        self.weights = torch.nn.ParameterDict(
            {n.replace(".", "__"): torch.nn.Parameter(weights[n].to(dtype)) for n in self.names})
        self.check_parameter_set()

    def params(self):
        return {n: self.weights[n.replace(".", "__")] for n in self.names}

    @property
    def encoder_decoder(self):
        return self.config.get("shape") == "encoder_decoder"

    def source_of(self, tokens, source, source_lengths):
        """The reference's (ids, lengths) of an encoder-decoder, None for a one-stack model."""
        if not self.encoder_decoder:
            if source is not None or source_lengths is not None:
                raise ValueError(f"a {self.config.get('shape', 'decoder')} model takes no source")
            return None
        if source is None or source_lengths is None:
            raise ValueError("an encoder-decoder needs the source ids [B, T_s] and source_lengths [B]")
        source, source_lengths = torch.as_tensor(source).long(), torch.as_tensor(source_lengths).long()
        B, T_s = source.shape
        if source.shape[0] != tokens.shape[0] or tuple(source_lengths.shape) != (B,):
            raise ValueError(f"source {tuple(source.shape)} and source_lengths {tuple(source_lengths.shape)} do not "
                             f"match the batch of {tokens.shape[0]} rows")
        if B and not (1 <= int(source_lengths.min()) and int(source_lengths.max()) <= T_s):
            raise ValueError(f"source_lengths {source_lengths.tolist()} are not in 1..{T_s}")
        return source, source_lengths

    def forward(self, tokens, source=None, source_lengths=None):
        return ref.Model(self.config, self.params()).forward(tokens, self.source_of(tokens, source, source_lengths))

    def loss(self, tokens, targets, source=None, source_lengths=None):
        return ref.Model(self.config, self.params()).loss(tokens, targets,
                                                          self.source_of(tokens, source, source_lengths))

    def check_parameter_set(self):
        """Every weight the equations use is in the checkpoint, and every checkpoint weight is used."""
        m = ref.Model(self.config, self.params())
        tokens = torch.zeros(1, 2, dtype=torch.int64)
        source = (torch.zeros(1, 2, dtype=torch.int64), torch.tensor([2])) if self.encoder_decoder else None
        with torch.no_grad():
            m.forward(tokens, source)
        if m.unused():
            raise ValueError(f"the checkpoint has weights the model does not use: {m.unused()[:5]}")


def read_model(path):
    """(model config, weights) of an export directory or a run directory."""
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    if config.get("format") == EXPORT_FORMAT:
        tensors, _ = read_safetensors(os.path.join(path, "model.safetensors"), checked=True)
        optimizer = [n for n in tensors if n.startswith("optim.")]
        if optimizer:
            raise ValueError(f"{path}/model.safetensors holds optimizer state ({optimizer[0]}, ...): not an export")
        return config["model"], tensors
    if "format" in config:
        raise ValueError(f"{path}/config.json has format {config['format']!r}; this loader reads {EXPORT_FORMAT} "
                         "(an older export has no checksum: export the run again)")
    tensors, _ = read_safetensors(os.path.join(path, "checkpoint.safetensors"))
    return config["model"], {n: t for n, t in tensors.items() if not n.startswith("optim.")}


def load(path, dtype=torch.float32):
    """The PyTorch module (the reference's equations) of an export or a run directory, with its weights."""
    return NormlabModel(*read_model(path), dtype)


def load_run(run_dir, dtype=torch.float32):
    """The PyTorch module of the run in run_dir, with its checkpoint's weights."""
    return load(run_dir, dtype)


class ReadTracking(dict):
    """A dict that remembers which keys were read (`read`), so that a weight left unread is caught."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


# The forms torch.nn.Transformer* computes: a placement's norm_first and the slot of its sub-layer norms, and the
# FFN activations it takes.
NN_PLACEMENTS = {"post": (False, "post_norm"), "pre": (True, "in_norm")}
NN_ACTIVATIONS = {"relu": "relu", "gelu": "gelu",
                  "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}


def nn_unsupported(cfg):
    """Why torch.nn.Transformer* cannot compute this model (None when it can)."""
    opts = {k: v for k, v in cfg.get("options", {}).items() if k not in INIT_ONLY_OPTIONS}
    checks = [
        (cfg["placement"] in NN_PLACEMENTS, f"placement {cfg['placement']!r} (it has post and pre)"),
        (cfg["norm"]["type"] == "layernorm" and cfg["norm"]["bias"], "a norm other than LayerNorm with a bias"),
        (cfg["activation"] in NN_ACTIVATIONS, f"activation {cfg['activation']!r}"),
        (cfg["bias"], "linear maps without biases"),
        (cfg["positions"] in ("learned", "sinusoidal"), f"positions {cfg['positions']!r} (rotary)"),
        (not cfg["embed_norm"] and cfg["embed_scale"] in ("none", "sqrt_d"), "an embedding norm or learned scale"),
        (opts.get("qk_norm", "none") == "none" and not opts.get("v_norm", False), "QK- or v-norm"),
        (not opts.get("attn_softcap", 0) and not opts.get("final_softcap", 0), "soft-caps"),
    ]
    missing = [what for ok, what in checks if not ok]
    return ", ".join(missing) if missing else None


def nn_attention(w, normlab, torch_prefix):
    """normlab's q, k, v, o of one attention as nn.MultiheadAttention's packed in_proj and out_proj."""
    return {f"{torch_prefix}.in_proj_weight": torch.cat([w[f"{normlab}.{p}.weight"] for p in "qkv"]),
            f"{torch_prefix}.in_proj_bias": torch.cat([w[f"{normlab}.{p}.bias"] for p in "qkv"]),
            f"{torch_prefix}.out_proj.weight": w[f"{normlab}.o.weight"],
            f"{torch_prefix}.out_proj.bias": w[f"{normlab}.o.bias"]}


def nn_layer(w, normlab, torch_prefix, sublayers, slot):
    """One encoder or decoder layer: its attentions, linear1/2 (fc1, fc2) and norm1.. in sub-layer order."""
    state = {}
    attentions = {"attn": "self_attn", "cross": "multihead_attn"}
    for k, s in enumerate(sublayers, start=1):
        if s in attentions:
            state.update(nn_attention(w, f"{normlab}.{s}", f"{torch_prefix}.{attentions[s]}"))
        for part in ("weight", "bias"):
            state[f"{torch_prefix}.norm{k}.{part}"] = w[f"{normlab}.{s}.{slot}.{part}"]
    for torch_name, name in (("linear1", "fc1"), ("linear2", "fc2")):
        for part in ("weight", "bias"):
            state[f"{torch_prefix}.{torch_name}.{part}"] = w[f"{normlab}.ffn.{name}.{part}"]
    return state


class TorchNNModel(torch.nn.Module):
    """A normlab model computed by PyTorch's own modules (module docstring): torch.nn.Transformer or
    torch.nn.TransformerEncoder between normlab's embedding and head. forward(tokens[, source, source_lengths])."""

    def __init__(self, model_config, weights, dtype=torch.float64):
        super().__init__()
        cfg = ref.resolve(reference_config(model_config))
        why = nn_unsupported(cfg)
        if why:
            raise ValueError(f"torch.nn.Transformer has no place for this model's {why}")
        self.cfg, self.dtype = cfg, dtype
        d = cfg["d_model"]
        norm_first, slot = NN_PLACEMENTS[cfg["placement"]]
        common = dict(nhead=cfg["n_heads"], dim_feedforward=cfg["d_ff"], dropout=0.0,
                      activation=NN_ACTIVATIONS[cfg["activation"]], layer_norm_eps=cfg["norm"]["eps"],
                      batch_first=True, norm_first=norm_first, dtype=dtype)
        w = ReadTracking({n: t.to(dtype) for n, t in weights.items()})
        state = {}
        if self.encoder_decoder:
            N, M = cfg["encoder_layers"], cfg["n_layers"]
            self.body = torch.nn.Transformer(d_model=d, num_encoder_layers=N, num_decoder_layers=M, **common)
            # Else torch 1.13's inference fast path returns the memory as a nested tensor cut to the longest source,
            # which its own decoder's memory_key_padding_mask (the batch's full width) then does not fit.
            self.body.encoder.enable_nested_tensor = False
            for i in range(N):
                state.update(nn_layer(w, f"encoder.layers.{i}", f"encoder.layers.{i}", ref.SUBLAYERS, slot))
            for i in range(M):
                state.update(nn_layer(w, f"decoder.layers.{i}", f"decoder.layers.{i}", ref.DECODER_SUBLAYERS, slot))
            stacks = {"encoder": "encoder.final_norm", "decoder": "decoder.final_norm"}
        else:
            layer = torch.nn.TransformerEncoderLayer(d_model=d, **common)
            self.body = torch.nn.TransformerEncoder(layer, cfg["n_layers"], norm=torch.nn.LayerNorm(
                d, eps=cfg["norm"]["eps"], dtype=dtype), enable_nested_tensor=False)
            for i in range(cfg["n_layers"]):
                state.update(nn_layer(w, f"layers.{i}", f"layers.{i}", ref.SUBLAYERS, slot))
            stacks = {"": "final_norm"}
        for stack, name in stacks.items():
            owner = getattr(self.body, stack) if stack else self.body
            if cfg["final_norm"]:   # torch.nn.Transformer always makes these norms; without one it is left out
                for part in ("weight", "bias"):
                    state[f"{stack + '.' if stack else ''}norm.{part}"] = w[f"{name}.{part}"]
            else:
                owner.norm = None
        self.body.load_state_dict(state, strict=True)
        self.embed = torch.nn.Parameter(w["embed.tokens.weight"])
        self.head = self.embed if cfg["tied_embeddings"] else torch.nn.Parameter(w["lm_head.weight"])
        self.positions = torch.nn.ParameterDict({
            side.rstrip(".") or "single": torch.nn.Parameter(w[f"{side}embed.positions.weight"])
            for side in (("encoder.", "decoder.") if self.encoder_decoder else ("",))
        }) if cfg["positions"] == "learned" else None
        unused = set(w) - w.read
        if unused:
            raise ValueError(f"weights with no place in torch.nn.Transformer: {sorted(unused)[:5]}")
        self.scale = math.sqrt(d) if cfg["embed_scale"] == "sqrt_d" else 1.0

    @property
    def encoder_decoder(self):
        return self.cfg["shape"] == "encoder_decoder"

    def embed_side(self, ids, side):
        T = ids.shape[1]
        h = self.embed[ids.long()] * self.scale
        if self.positions is not None:
            return h + self.positions[side][:T][None]
        return h + ref.sinusoids(T, self.cfg["d_model"]).to(self.dtype)[None]

    def forward(self, tokens, source=None, source_lengths=None):
        T = tokens.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)    # True: a later key, not attended
        if self.encoder_decoder:
            if source is None or source_lengths is None:
                raise ValueError("an encoder-decoder needs the source ids [B, T_s] and source_lengths [B]")
            source = torch.as_tensor(source)
            padding = torch.arange(source.shape[1])[None, :] >= torch.as_tensor(source_lengths).long()[:, None]
            h = self.body(self.embed_side(source, "encoder"), self.embed_side(tokens, "decoder"), tgt_mask=causal,
                          src_key_padding_mask=padding, memory_key_padding_mask=padding)
        else:
            h = self.body(self.embed_side(tokens, "single"), mask=causal if self.cfg["shape"] == "decoder" else None)
        return h @ self.head.t()


def load_torch_nn(path, dtype=torch.float64):
    """The torch.nn.Transformer / TransformerEncoder form (TorchNNModel) of an export or a run directory."""
    return TorchNNModel(*read_model(path), dtype)


def relative_error(got, want):
    return float(torch.linalg.norm(got - want) / max(float(torch.linalg.norm(want)), 1e-30))


def describe(path, cfg, tensors, parameters, nn):
    shape = cfg.get("shape", "decoder")
    if shape == "encoder_decoder":
        layers = cfg.get("encoder_layers", 0) or cfg["n_layers"]
        shape += f" ({layers} encoder, {cfg['n_layers']} decoder layers)"
    body = {"encoder_decoder": "torch.nn.Transformer", "decoder": "torch.nn.TransformerEncoder with a causal mask"}
    how = f", in {body.get(cfg.get('shape'), 'torch.nn.TransformerEncoder')}" if nn else ""
    return f"{path}: {shape}, placement {cfg['placement']}, {tensors} tensors, {parameters} parameters{how}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", help="an export of `normlab export` (config.json, model.safetensors) or a run directory "
                                 "(config.json, checkpoint.safetensors)")
    ap.add_argument("--nn", action="store_true",
                    help="build it from torch.nn.Transformer / TransformerEncoder instead of the reference's equations")
    ap.add_argument("--check", metavar="FILE", help="`normlab eval --logits FILE` output to compare with")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="largest relative L2 error of the logits")
    a = ap.parse_args()
    try:
        cfg, weights = read_model(a.path)
    except (OSError, ValueError) as e:  # a missing, damaged or foreign export: one line, not a traceback
        raise SystemExit(f"to_torch.py: error: {e}")
    model = TorchNNModel(cfg, weights) if a.nn else NormlabModel(cfg, weights, dtype=torch.float64)
    model.eval()
    print(describe(a.path, model.cfg if a.nn else model.config, len(weights),
                   sum(t.numel() for t in weights.values()), a.nn))
    if not a.check:
        return 0
    data, meta = read_safetensors(a.check)
    source = ()
    if model.encoder_decoder:
        missing = [n for n in ("source", "source_lengths") if n not in data]
        if missing:
            raise SystemExit(f"{a.check}: an encoder-decoder's check needs {' and '.join(missing)}; write the file "
                             "with this normlab's `eval --logits`")
        source = (data["source"], data["source_lengths"])
    tokens, targets = data["tokens"].long(), data["targets"].long()
    with torch.no_grad():
        logits = model(tokens, *source)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                                 ignore_index=-1, label_smoothing=cfg.get("label_smoothing", 0.0))
    err = relative_error(logits, data["logits"].double())
    what = f"{tuple(data['tokens'].shape)} tokens" + (f" from a source of {tuple(source[0].shape)}" if source else "")
    print(f"logits of {what} (checkpoint step {meta.get('step', '?')}): relative L2 "
          f"error {err:.2e} against normlab's fp32 (tolerance {a.tolerance:.0e}); loss {float(loss):.6f}")
    return 0 if err <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
