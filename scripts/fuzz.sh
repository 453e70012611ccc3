#!/usr/bin/env bash
# Fuzzes every reader (tests/fuzz/README.md): builds the libFuzzer targets with Debian's clang-14 and
# ASan + UBSan in build-sanitize (scripts/hardening-build.sh, shared with scripts/test.sh --sanitize), then runs each for SECONDS (default 60) from its seed corpus and prints
# executions and coverage per target. A crash stops with status 1; its input is in build-sanitize/fuzz/crashes/<target>/:
# fix the reader and keep the input in tests/fuzz/regressions/<target>/ (the normal suite replays it).
# Usage: scripts/fuzz.sh [SECONDS]        (CI runs scripts/fuzz.sh 15)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
case "$seconds" in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;; esac
targets=(fuzz_safetensors fuzz_config fuzz_tokens fuzz_sweep fuzz_sentencepiece fuzz_logs)
start=$(date +%s)
scripts/hardening-build.sh "${targets[@]}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS=1
status=0
summary=()
for t in "${targets[@]}"; do
  work="build-sanitize/fuzz/corpus/$t" crashes="build-sanitize/fuzz/crashes/$t"
  mkdir -p "$work" "$crashes"
  log="build-sanitize/fuzz/$t.log"
  if build-sanitize/"$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$crashes/" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    result=ok
  else
    result="CRASH (input in $crashes/, log $log)"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || echo "cov: ? ft: ?")
  corpus=$(find "$work" -type f | wc -l)
  line="$t: $result, $execs executions in ${seconds} s, $cov (edges, features), corpus $corpus inputs"
  echo "fuzz: $line"
  summary+=("$line")
done
echo "fuzz: done in $(($(date +%s) - start)) s"
printf '  %s\n' "${summary[@]}"
exit $status
