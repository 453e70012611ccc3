#!/usr/bin/env python3
"""Alpha-beta model of data-parallel step time on N hosts (docs/scaling.md).

    T(N) = T1 / N + T_allreduce(N),   T_allreduce(N) = 2 (N - 1) alpha + 2 (N - 1) / N * S / beta

T1: the measured step time of one host (the whole global batch, all its cores); S: the gradient bytes summed
per step (4 bytes per parameter in fp32); alpha: per-message latency; beta: link bandwidth in bytes/s. The ring
all-reduce sends each byte 2 (N - 1) / N times; the model assumes no overlap of the all-reduce with the backward
pass (normlab sums after the backward) and a batch that splits evenly (the per-row cost stays constant).

Usage: bench/scaling_model.py --name small --step-ms 1629 --params 6.9e6 [--json]
Standard library only.
"""
import argparse
import json

LINKS = [("10 Gb/s Ethernet (TCP)", 25e-6, 10e9 / 8), ("100 Gb/s (RDMA)", 3e-6, 100e9 / 8)]
HOSTS = [1, 2, 4, 8, 16, 32, 64]


def step_time(t1, bytes_, n, alpha, beta):
    allreduce = 0.0 if n == 1 else 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes_ / beta
    return t1 / n + allreduce, allreduce


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", required=True)
    p.add_argument("--step-ms", type=float, required=True, help="measured ms per step of one host")
    p.add_argument("--params", type=float, required=True, help="parameter count")
    p.add_argument("--bytes-per-param", type=float, default=4.0)
    p.add_argument("--json", action="store_true", help="one JSON line per (link, N) instead of the table")
    a = p.parse_args()
    t1 = a.step_ms / 1000
    size = a.params * a.bytes_per_param
    print(f"\n{a.name}: {a.params / 1e6:.1f} M parameters, {size / 2**20:.1f} MiB of gradients per step; "
          f"one host {a.step_ms:.0f} ms/step")
    for link, alpha, beta in LINKS:
        rows = []
        for n in HOSTS:
            t, ar = step_time(t1, size, n, alpha, beta)
            rows.append({"model": a.name, "link": link, "hosts": n, "step_ms": t * 1000, "allreduce_ms": ar * 1000,
                         "speedup": t1 / t, "efficiency": t1 / (n * t)})
        if a.json:
            for r in rows:
                print(json.dumps(r))
            continue
        best = max(rows, key=lambda r: r["speedup"])
        half = [r["hosts"] for r in rows if r["efficiency"] >= 0.5]
        print(f"\n{link} (alpha {alpha * 1e6:.0f} us, {beta * 8 / 1e9:.0f} Gb/s):")
        print("| hosts | step ms | all-reduce ms | speedup | efficiency |")
        print("|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['hosts']} | {r['step_ms']:.0f} | {r['allreduce_ms']:.1f} | {r['speedup']:.2f} | "
                  f"{r['efficiency']:.0%} |")
        print(f"stops paying: the most hosts at >= 50% efficiency is {max(half)}; the speedup peaks at "
              f"{best['speedup']:.1f}x on {best['hosts']} hosts (of those modelled)")


if __name__ == "__main__":
    main()
