#!/usr/bin/env bash
# The norm micro-benchmark (bench/README.md): builds normlab_bench_kernels, measures the machine's triad
# bandwidth, GEMM GFLOP/s and normlab's LayerNorm / RMSNorm forward + backward against them, then times PyTorch's
# on the same shape with the same threads (when Debian's python3-torch is installed), and prints one table.
# Usage: bench/kernels.sh [--threads N] [--rows R] [--d D] [--repeats K] [--build-dir DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR="$ROOT/build"
args=()
while (($#)); do
  case "$1" in
    --threads | --rows | --d | --repeats) args+=("$1" "$2"); shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    *) echo "kernels.sh: unknown option '$1' (known: --threads --rows --d --repeats --build-dir)" >&2; exit 2 ;;
  esac
done
cmake --build "$BUILD_DIR" --target normlab_bench_kernels >&2
normlab=$(OMP_WAIT_POLICY=PASSIVE "$BUILD_DIR/bench/normlab_bench_kernels" "${args[@]}")
torch='{}'
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  torch=$(OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 "$ROOT/bench/torch_kernels.py" "${args[@]}")
else
  echo "kernels.sh: python3-torch is not installed (scripts/setup.sh --with-torch): normlab's side only" >&2
fi
/usr/bin/python3 - "$normlab" "$torch" <<'PY'
import json, sys
n, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
triad = n["triad_gb_per_s"]
bytes_total = 6 * 4 * n["rows"] * n["d"]  # a norm alone: read x, write y; read x, dy, read-modify-write dx
print(f"{n['cpu']['model']} ({' '.join(n['cpu']['isa'])}), {n['threads']} threads")
print(f"STREAM triad {triad:.1f} GB/s; GEMM GFLOP/s fp32 (bf16, operand conversion included) " + ", ".join(
    f"{g['m']}x{g['n']}x{g['k']} {g['gflops']:.0f}" + (f" ({g['bf16_gflops']:.0f})" if "bf16_gflops" in g else "")
    for g in n["gemm"]))
print(f"{'norm':<14} {'impl':<8} {'fwd ms':>8} {'bwd ms':>8} {'GB/s':>7} {'of triad':>9}")
torch_rows = {r["norm"]: r for r in t.get("norms", [])}
for row in n["norms"]:
    for impl, r in (("normlab", row), (f"torch {t.get('torch', '')}", torch_rows.get(row["norm"]))):
        if r is None:
            continue
        # normlab's rows carry their own traffic ("add+": the fused pair, "add,": add then norm, 12 x 4 bytes)
        gbs = r["gb_per_s"] if r is row else bytes_total / ((r["forward_ms"] + r["backward_ms"]) / 1e3) / 1e9
        print(f"{row['norm']:<14} {impl:<8} {r['forward_ms']:>8.2f} {r['backward_ms']:>8.2f} {gbs:>7.1f} {gbs / triad:>9.2f}")
PY
