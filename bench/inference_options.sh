#!/usr/bin/env bash
# The inference-time approximations' trade-off (docs/performance.md, issue 14): for each trained run given, the
# validation loss (`normlab eval`) and the generation speed (`normlab generate`, key-value cache, greedy) with
# top-k sparse attention and with sampled LayerNorm/RMSNorm statistics, beside the exact model. The speed is the best
# of --repeats generations (the machine should be quiet).
# Usage: bench/inference_options.sh [--batches N] [--tokens N] [--repeats N] RUN_DIR...   (normlab built in build/)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NORMLAB=${NORMLAB:-$ROOT/build/normlab}
BATCHES=16 TOKENS=2000 REPEATS=3
runs=()
while (($#)); do
  case "$1" in
    --batches) BATCHES=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    -*) echo "inference_options.sh: unknown option '$1' (known: --batches --tokens --repeats)" >&2; exit 2 ;;
    *) runs+=("$1"); shift ;;
  esac
done
((${#runs[@]})) || { echo "usage: bench/inference_options.sh [--batches N] [--tokens N] [--repeats N] RUN_DIR..." >&2; exit 2; }
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; normlab $(git -C "$ROOT" rev-parse --short HEAD)"
echo "| run (T) | option | val loss | Δ loss | generate tokens/s (best of $REPEATS) |"
echo "|---|---|---|---|---|"
for run in "${runs[@]}"; do
  T=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['train']['seq_len'])" "$run/config.json")
  exact=""
  for option in "" "--attn-top-k 32" "--attn-top-k 16" "--attn-top-k 8" "--attn-top-k 4" \
                "--norm-sample 2" "--norm-sample 4" "--norm-sample 8"; do
    # shellcheck disable=SC2086  # the option is two words
    loss=$("$NORMLAB" eval --run "$run" --batches "$BATCHES" $option | sed -n 's/.*validation loss \([0-9.]*\).*/\1/p')
    speed=0
    for ((i = 0; i < REPEATS; i++)); do
      # shellcheck disable=SC2086
      s=$("$NORMLAB" generate --run "$run" -n "$TOKENS" -t 0 -p "And" $option 2>&1 >/dev/null |
        sed -n 's/.*(\([0-9]*\) tokens\/s.*/\1/p')
      ((s > speed)) && speed=$s
    done
    [[ -z $exact ]] && exact=$loss
    delta=$(/usr/bin/python3 -c "import sys; print(f'{float(sys.argv[1]) - float(sys.argv[2]):+.4f}')" "$loss" "$exact")
    echo "| $(basename "$run") ($T) | ${option:-exact} | $loss | $delta | $speed |"
  done
done
