#!/usr/bin/env bash
# The results table of bench/README.md: three models × (normlab fp32 vs torch fp32, normlab bf16 vs torch fp32,
# normlab bf16 vs torch bf16 autocast), 3 alternating rounds each, then the small model at 1 thread (normlab's 1 → 2
# thread scaling). About 12 minutes on 2 cores; run it on a quiet machine. Usage: bench/table.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/bench/table}
mkdir -p "$OUT"
STUDY=(--vocab 4096 --d-model 64 --layers 12 --heads 4 --d-ff 256 --seq 64 --batch 16 --steps 10)
GPT2=(--vocab 50257 --d-model 768 --layers 12 --heads 12 --d-ff 3072 --seq 64 --batch 4)
row() {
  local name=$1
  shift
  echo "== $name ($(date -u +%H:%M:%S) UTC)"
  bench/run.sh --no-build --rounds 3 --out "$OUT/$name.jsonl" "$@" >"$OUT/$name.txt" 2>&1
  grep -E "^round [0-9]:|median of per-round" "$OUT/$name.txt"
}
bench/run.sh --small --rounds 1 --steps 1 --warmup 0 >/dev/null  # builds, and checks that both sides run
row study-fp32 "${STUDY[@]}"
row study-bf16 "${STUDY[@]}" --bf16
row study-bf16-autocast "${STUDY[@]}" --bf16 --torch-bf16
row small-fp32
row small-bf16 --bf16
row small-bf16-autocast --bf16 --torch-bf16
row gpt2-fp32 "${GPT2[@]}"
row gpt2-bf16 "${GPT2[@]}" --bf16
row gpt2-bf16-autocast "${GPT2[@]}" --bf16 --torch-bf16
row small-fp32-1thread --threads 1
echo "every run's output: $OUT"
