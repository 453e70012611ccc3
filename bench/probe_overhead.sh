#!/usr/bin/env bash
# Training throughput with probes off and on at the default interval (--probes: every 50 steps),
# alternated in one invocation (off, on, off, on, ...); prints each round's tokens/s and the median
# ratio. The model is the built-in default on data/kjv (scripts/setup.sh prepares it).
# Usage: bench/probe_overhead.sh [rounds (3)] [steps (200)]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} steps=${2:-200}
bin=build/normlab
[ -x "$bin" ] || { echo "probe_overhead: build first (scripts/setup.sh)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
rate() {  # tokens/s over steps 51..steps: the first logged window holds the warm-up
  python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; t=[x for x in r if x['type']=='train']; \
a,b=t[0],t[-1]; print((b['step']-a['step'])*16*128/(b['elapsed_s']-a['elapsed_s']))" "$1/metrics.jsonl"
}
ratios=()
for r in $(seq "$rounds"); do
  for mode in off on; do
    extra=(); [ "$mode" = on ] && extra=(--probes)
    "$bin" train --run "$tmp/$mode$r" --set train.steps="$steps" --set train.log_every=50 --set train.eval_every=0 \
      --set train.checkpoint_every=0 "${extra[@]}" >/dev/null 2>&1
    eval "rate_$mode=$(rate "$tmp/$mode$r")"
  done
  ratio=$(python3 -c "print($rate_on/$rate_off)")
  ratios+=("$ratio")
  printf 'round %d: probes off %.0f tok/s, on %.0f tok/s, on/off %.3f\n' "$r" "$rate_off" "$rate_on" "$ratio"
done
python3 -c "import statistics,sys; print('median on/off ratio: %.3f' % statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
