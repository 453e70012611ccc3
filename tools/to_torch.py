#!/usr/bin/python3
"""Take a normlab run to PyTorch: the module for its config.json (every placement, norm type, switch and preset,
built by the independent reference in tools/torch_reference.py, not from normlab's code) with the weights of its
checkpoint.safetensors (the AdamW moments are skipped). No name map is needed: the checkpoint's tensor names are
the reference's parameter names (docs/model.md).

    import sys; sys.path.insert(0, "tools")
    from to_torch import load_run
    model = load_run("runs/pre")             # a torch.nn.Module; its parameters are the checkpoint's weights
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
    /usr/bin/python3 tools/to_torch.py runs/pre --check /tmp/logits.safetensors

(for an encoder-decoder the file also holds the batch's source and source_lengths, which the check feeds in).

Use Debian's python3 with python3-torch (scripts/setup.sh --with-torch). Inference only: dropout is left out
(as in normlab's evaluation).
"""
import argparse
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402

# normlab writes every model-level switch into config.json; these only set initial values, which the
# checkpoint's weights replace, so the reference does not take them. (deepnorm_beta, DeepNorm's β_e rule, is
# init-only too; normlab writes it for every DeepNorm model, the reference takes it for an encoder-decoder only.)
INIT_ONLY_OPTIONS = {"qk_scale_init", "dyt_alpha", "dyt_alpha_attn", "dyt_alpha_ffn", "dyt_alpha_final",
                     "deepnorm_beta"}
DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64}


def read_safetensors(path):
    """name -> tensor (and the metadata), read with the standard library and torch.frombuffer."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
        data = f.read()
    meta = header.pop("__metadata__", {})
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
    known = set(ref.MODEL_OPTIONS) | set(placement.switches)
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


def load_run(run_dir, dtype=torch.float32):
    """The PyTorch module of the run in run_dir, with its checkpoint's weights."""
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    tensors, _ = read_safetensors(os.path.join(run_dir, "checkpoint.safetensors"))
    weights = {n: t for n, t in tensors.items() if not n.startswith("optim.")}
    return NormlabModel(config["model"], weights, dtype)


def relative_error(got, want):
    return float(torch.linalg.norm(got - want) / max(float(torch.linalg.norm(want)), 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="a normlab run directory (config.json, checkpoint.safetensors)")
    ap.add_argument("--check", metavar="FILE", help="`normlab eval --logits FILE` output to compare with")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="largest relative L2 error of the logits")
    a = ap.parse_args()
    model = load_run(a.run, dtype=torch.float64)
    n = sum(p.numel() for p in model.parameters())
    shape = model.config.get("shape", "decoder")
    if model.encoder_decoder:
        layers = model.config.get("encoder_layers", 0) or model.config["n_layers"]
        shape += f" ({layers} encoder, {model.config['n_layers']} decoder layers)"
    print(f"{a.run}: {shape}, placement {model.config['placement']}, {len(model.names)} tensors, {n} parameters")
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
    with torch.no_grad():
        loss, logits = model.loss(data["tokens"].long(), data["targets"].long(), *source)
    err = relative_error(logits, data["logits"].double())
    what = f"{tuple(data['tokens'].shape)} tokens" + (f" from a source of {tuple(source[0].shape)}" if source else "")
    print(f"logits of {what} (checkpoint step {meta.get('step', '?')}): relative L2 "
          f"error {err:.2e} against normlab's fp32 (tolerance {a.tolerance:.0e}); loss {float(loss):.6f}")
    return 0 if err <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
