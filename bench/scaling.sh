#!/usr/bin/env bash
# Data-parallel against threads on this machine (docs/scaling.md): the same training, same global batch, as
# one process with 2 threads and as `mpirun -np 2` with 1 thread each, alternated for --rounds rounds; then
# the alpha-beta model of N hosts (bench/scaling_model.py) fitted to the measured one-process step time.
# Trains on the prepared KJV corpus (data/kjv: scripts/setup.sh makes it).
# Usage: bench/scaling.sh [--model small|gpt2] [--rounds R] [--steps S] [--build-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
model=small rounds=3 steps=8 build=build
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    *) echo "scaling.sh: unknown option '$1' (see the usage line at the top)" >&2; exit 2 ;;
  esac
done
case "$model" in  # bench/README.md's models, on KJV's 4096-token vocabulary
  small) shape=(model.d_model=256 model.n_layers=8 model.n_heads=4 model.d_ff=1024 model.max_seq_len=256
                train.seq_len=256 train.batch_size=8) ;;
  gpt2) shape=(model.d_model=768 model.n_layers=12 model.n_heads=12 model.d_ff=3072 model.max_seq_len=64
               train.seq_len=64 train.batch_size=4) ;;
  *) echo "scaling.sh: --model is small or gpt2, not '$model'" >&2; exit 2 ;;
esac
[ -x "$build/normlab" ] || { echo "scaling.sh: $build/normlab is missing: cmake --build $build" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "scaling.sh: mpirun is missing: run scripts/setup.sh" >&2; exit 2; }
[ -s data/kjv/meta.json ] || { echo "scaling.sh: data/kjv is missing: run scripts/setup.sh" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
scratch=$(mktemp -d) && trap 'rm -rf "$scratch"' EXIT
sets=(--set data.dir=data/kjv --set train.steps="$steps" --set train.log_every=1 --set train.eval_every=0
      --set train.eval_batches=1 --set train.checkpoint_every=0)
for s in "${shape[@]}"; do sets+=(--set "$s"); done
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(nproc) cores;" \
     "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|amx_tile)$' | tr '\n' ' ')"
for r in $(seq "$rounds"); do
  "$build/normlab" train --run "$scratch/threads-$r" "${sets[@]}" --set train.threads=2 --profile >/dev/null 2>&1
  mpirun -np 2 --oversubscribe --bind-to none "$build/normlab" train --run "$scratch/ranks-$r" "${sets[@]}" \
    --set train.threads=1 --profile >/dev/null 2>&1
done
python3 - "$scratch" "$rounds" "$model" <<'PY'
import json, statistics, sys, pathlib
scratch, rounds, model = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def step_ms(run):  # per-step wall times from elapsed_s, the first step (warm-up) left out
    t = [json.loads(l)["elapsed_s"] for l in open(run / "metrics.jsonl") if '"train"' in l]
    return [1000 * (b - a) for a, b in zip(t, t[1:])]
def share(run, key):  # of the training loop's wall time
    p = json.load(open(run / "profile.json"))
    return p["phases_s"].get(key, 0.0) / p["loop_s"]
rows = {"1 process x 2 threads": "threads", "2 ranks x 1 thread (mpirun -np 2)": "ranks"}
med = {}
for label, kind in rows.items():
    times = [statistics.median(step_ms(scratch / f"{kind}-{r}")) for r in range(1, rounds + 1)]
    med[kind] = statistics.median(times)
    ar = statistics.median(share(scratch / f"{kind}-{r}", "all_reduce") for r in range(1, rounds + 1))
    print(json.dumps({"model": model, "setup": label, "ms_per_step_rounds": [round(t, 1) for t in times],
                      "ms_per_step": round(med[kind], 1), "all_reduce_share": ar}))
params = json.load(open(scratch / "threads-1" / "summary.json"))["parameters"]
print(json.dumps({"model": model, "parameters": params, "allreduce_bytes_per_step": 4 * params,
                  "ranks_over_threads_time": round(med["ranks"] / med["threads"], 3)}))
open(scratch / "fit", "w").write(f"{med['threads']:.1f} {params}\n")
PY
read -r step_ms params < "$scratch/fit"
python3 bench/scaling_model.py --name "$model" --step-ms "$step_ms" --params "$params"
