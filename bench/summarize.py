"""The results table of bench/README.md and docs/performance.md, from the raw output of bench/table.sh.

python3 bench/summarize.py results/bench

Reads DIR/<model>-<precision>.jsonl (one JSON line per run, after a "meta" line naming the CPU, commit, torch and
BLAS) and prints a Markdown table: per model, normlab's tokens/s over PyTorch's as the median of the per-round ratios
(each round runs both, alternately), with the range over the rounds, then the 1 -> 2 thread scaling of the small
model. Nothing is typed by hand: rerun bench/table.sh DIR and this script to replace the table.
"""
import json
import statistics
import sys
from pathlib import Path

MODELS = [("study", "study size (d 64, 12 layers, T 64, B 16, vocab 4096)"),
          ("small", "small (d 256, 8 layers, T 256, B 8, vocab 8192)"),
          ("gpt2", "GPT-2 124M (d 768, 12 layers, T 64, B 4, vocab 50257)")]
PAIRS = [("fp32", "fp32 vs fp32"), ("bf16", "bf16 vs fp32"), ("bf16-autocast", "bf16 vs bf16 autocast")]


def runs(path):
    meta, rows = {}, []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("impl") == "meta":
            meta = record
        else:
            rows.append(record)
    return meta, rows


def round_ratios(rows):
    """normlab tokens/s over torch tokens/s, per round: torch median ms/step over normlab's."""
    by_round = {}
    for r in rows:
        by_round.setdefault(r["round"], {})[r["impl"]] = statistics.median(r["ms_per_step"])  # timed steps only
    return [v["torch"] / v["normlab"] for _, v in sorted(by_round.items()) if "torch" in v and "normlab" in v]


def normlab_ms(rows):
    return statistics.median(statistics.median(r["ms_per_step"]) for r in rows if r["impl"] == "normlab")


def main(folder):
    folder = Path(folder)
    meta = {}
    lines = ["| model | " + " | ".join(label for _, label in PAIRS) + " |", "|---|---|---|---|"]
    for key, label in MODELS:
        cells = []
        for pair, _ in PAIRS:
            path = folder / f"{key}-{pair}.jsonl"
            if not path.exists():
                cells.append("not run")
                continue
            meta, rows = runs(path)
            ratios = round_ratios(rows)
            cells.append(f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    one, two = folder / "small-fp32-1thread.jsonl", folder / "small-fp32.jsonl"
    scaling = ""
    if one.exists() and two.exists():
        scaling = (f"\n\nnormlab's small model, fp32: {normlab_ms(runs(one)[1]):.0f} ms a step at 1 thread, "
                   f"{normlab_ms(runs(two)[1]):.0f} ms at 2 ({normlab_ms(runs(one)[1]) / normlab_ms(runs(two)[1]):.2f}x).")
    print(f"normlab's training tokens/s over PyTorch's on the same model, median of the per-round ratios [range over "
          f"the rounds]; {meta.get('cpus', '?')} threads each on a {meta.get('cpu', '?')}, normlab "
          f"{meta.get('commit', '?')}, torch {meta.get('torch', '?')} with {meta.get('blas', '?').split(' (')[0]} "
          f"(`bash bench/table.sh {folder}`, then `python3 bench/summarize.py {folder}`; raw output in {folder}/):\n")
    print("\n".join(lines) + scaling)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/bench")
