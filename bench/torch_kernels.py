"""The PyTorch peer of normlab_bench_kernels: LayerNorm (F.layer_norm, its fused ATen kernel) and RMSNorm (torch
1.13 has none: x * rsqrt(mean(x^2) + eps) * g, as Llama's reference code writes it), forward and backward on
rows x d fp32, best of the repetitions. Prints one JSON line; bench/kernels.sh puts it beside normlab's."""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def best(repeats, fn):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--d", type=int, default=1024)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(7)
    x = torch.randn(a.rows, a.d, requires_grad=True)
    dy = torch.randn(a.rows, a.d)
    g = torch.ones(a.d, requires_grad=True)
    b = torch.zeros(a.d, requires_grad=True)
    norms = {
        "layernorm": lambda: F.layer_norm(x, (a.d,), g, b, 1e-5),
        "rmsnorm": lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g,
    }
    out = []
    for name, fn in norms.items():
        with torch.no_grad():
            forward_s = best(a.repeats, fn)
        backward_times = []
        for _ in range(a.repeats):
            y = fn()
            start = time.perf_counter()
            y.backward(dy)
            backward_times.append(time.perf_counter() - start)
            x.grad = g.grad = b.grad = None
        out.append({"norm": name, "forward_ms": 1e3 * forward_s, "backward_ms": 1e3 * min(backward_times)})
    print(json.dumps({"impl": "torch", "torch": torch.__version__, "threads": a.threads, "norms": out}))


if __name__ == "__main__":
    main()
