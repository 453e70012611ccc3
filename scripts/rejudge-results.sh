#!/bin/bash
# Judges the kept seed sets under results/ again with this build's rule, running nothing (`normlab study NAME
# --judge-only`, with the --seeds each report.json records), and regenerates results/README.md. Run it in the commit
# that changes a rule, so that the kept reports and the rule that wrote them stay one (KeptRunsJudgedAgain.* checks).
# usage: scripts/rejudge-results.sh [STUDY/SET ...]   (default: every design and fresh set)
set -euo pipefail
cd "$(dirname "$0")/.."
sets=("$@")
if [ ${#sets[@]} -eq 0 ]; then
  for dir in results/*/design results/*/fresh; do sets+=("${dir#results/}"); done
fi
for set in "${sets[@]}"; do
  study=${set%%/*}
  seeds=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['command']; print(c.split('--seeds ')[1].split()[0])" \
    "results/$set/report.json")
  max=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['max_seeds'] or 8)" "results/$set/report.json")
  if out=$(build/normlab study "$study" --judge-only --seeds "$seeds" --max-seeds "$max" --out "results/$set" \
    --jobs 1 2>&1); then
    echo "$set: $(sed -n 's/^verdict: //p' <<<"$out")"
  else
    echo "$set: $(tail -1 <<<"$out")"
  fi
done
build/normlab study index results
