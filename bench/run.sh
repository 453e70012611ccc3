#!/usr/bin/env bash
# normlab vs PyTorch: training throughput of the same GPT-style model, measured side by side.
# See bench/README.md. Usage: bench/run.sh [--threads N] [--rounds R] [--steps S] [--warmup W] [--small]
#                                         [--torch-env VAR=VAL]... [--normlab-env VAR=VAL]...
#                                         [--build-dir DIR] [--no-build] [--out FILE] [--system-blas]
#                                         [--wait-quiet SECONDS] [--normlab-plain] [--bf16] [--torch-bf16]
#        bench/run.sh --report FILE   (the table again, from the JSON lines an --out FILE saved)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=$ROOT/build
PY=/usr/bin/python3          # Debian's python3 with python3-torch; not a pyenv/venv python on PATH
THREADS=2 ROUNDS=3 STEPS=6 WARMUP=2
BUILD=1 SYSTEM_BLAS=0 OUT="" WAIT_QUIET=120 NORMLAB_PLAIN=0 REPORT=""
NORMLAB_PRECISION=() TORCH_PRECISION=()  # --bf16: normlab's train.precision = bf16; --torch-bf16: torch autocast
MODEL_ARGS=()
TORCH_ENV_EXTRA=() NORMLAB_ENV_EXTRA=()

usage() { sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --small) MODEL_ARGS=(--vocab 1024 --d-model 64 --layers 2 --heads 2 --seq 64 --batch 4); shift ;;
    --vocab|--d-model|--layers|--heads|--d-ff|--seq|--batch) MODEL_ARGS+=("$1" "$2"); shift 2 ;;
    --torch-env) TORCH_ENV_EXTRA+=("$2"); shift 2 ;;
    --normlab-env) NORMLAB_ENV_EXTRA+=("$2"); shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --system-blas) SYSTEM_BLAS=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    --wait-quiet) WAIT_QUIET=$2; shift 2 ;;
    --normlab-plain) NORMLAB_PLAIN=1; shift ;;
    --report) REPORT=$2; shift 2 ;;
    --bf16) NORMLAB_PRECISION=(--bf16); shift ;;
    --torch-bf16) TORCH_PRECISION=(--autocast-bf16); shift ;;
    -h|--help) usage 0 ;;
    *) echo "run.sh: unknown option $1" >&2; usage 2 ;;
  esac
done

# --- report --------------------------------------------------------------------------------------
report() {  # prints the table for a results file: one "meta" line, then one line per run
  "$PY" - "$1" <<'EOF'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
meta = next((r for r in rows if r["impl"] == "meta"), {})
runs = [r for r in rows if r["impl"] != "meta"]
by = {}
for r in runs:
    by.setdefault(r["impl"], []).append(r)
m, tok, threads = runs[0]["model"], runs[0]["tokens_per_step"], runs[0]["threads"]
precision = {impl: rs[0].get("precision", rs[0]["model"].get("precision", "fp32")) for impl, rs in by.items()}
print(f"model: vocab {m['vocab']}, d {m['d_model']}, {m['n_layers']} layers, {m['n_heads']} heads, d_ff {m['d_ff']}, "
      f"T {m['seq']}, B {m['batch']} ({tok} tokens/step), AdamW + clip 1.0; normlab {precision.get('normlab')}, "
      f"torch {precision.get('torch')}")
print(f"env: {threads} threads on {meta.get('cpus', '?')} CPUs ({meta.get('cpu', '?')}); normlab {meta.get('commit', '?')}; "
      f"torch {meta.get('torch', '?')} with {meta.get('blas', '?')}")
print(f"normlab env: {meta.get('normlab_env') or '(inherited)'}")
print(f"torch env: {meta.get('torch_env', '?')}")
print(f"rounds: {len(by.get('normlab', []))} (normlab, torch alternating); "
      f"{runs[0]['warmup']} warm-up steps per run discarded; {len(runs[0]['ms_per_step'])} timed steps per run")
print()

# A run "starved" when its process kept fewer than 75% of its threads busy on average: another
# process had a core (a 2-thread run whose CPU time equals its wall time ran on one core).
def starved(r):
    return st.median(r["cpu_ms_per_step"]) < 0.75 * r["threads"] * st.median(r["ms_per_step"])

print(f"{'impl':<8} {'median ms/step':>15} {'min ms/step':>12} {'tokens/s':>10} {'CPU ms/step':>12} {'outliers':>9} "
      f"{'busy runs':>10} {'starved runs':>13} {'peak RSS MiB':>13}")
for impl in ("normlab", "torch"):
    ms = [x for r in by[impl] for x in r["ms_per_step"]]
    cpu = st.median([x for r in by[impl] for x in r["cpu_ms_per_step"]])
    med = st.median(ms)
    slow = sum(x > 1.5 * med for x in ms)
    busy = sum(r["busy_at_start"] >= 25 for r in by[impl])
    hungry = sum(starved(r) for r in by[impl])
    n = len(by[impl])
    rss = [r["peak_rss_mib"] for r in by[impl] if "peak_rss_mib" in r]  # absent in files saved before it was recorded
    rss_text = f"{max(rss):.0f}" if rss else "-"
    print(f"{impl:<8} {med:>15.1f} {min(ms):>12.1f} {tok / med * 1e3:>10.0f} {cpu:>12.1f} {slow:>5}/{len(ms):<3} "
          f"{busy:>6}/{n:<3} {hungry:>9}/{n:<3} {rss_text:>13}")
print()
ratios, clean = [], []
for a, b in zip(by["normlab"], by["torch"]):
    ra = st.median(b["ms_per_step"]) / st.median(a["ms_per_step"])
    ratios.append(ra)
    flags = [f"{x['impl']} starved" for x in (a, b) if starved(x)]
    if not flags:
        clean.append(ra)
    print(f"round {a['round']}: normlab {st.median(a['ms_per_step']):.1f} ms, torch {st.median(b['ms_per_step']):.1f} ms,"
          f" ratio {ra:.3f}" + (f"   ({', '.join(flags)})" if flags else ""))
print(f"ratio (normlab tokens/s / torch tokens/s), median of per-round ratios: {st.median(ratios):.3f}"
      f"  [min {min(ratios):.3f}, max {max(ratios):.3f}]")
if clean:
    print(f"  over the {len(clean)} round(s) in which neither run starved: {st.median(clean):.3f}"
          f"  [min {min(clean):.3f}, max {max(clean):.3f}]")
else:
    print("  no round in which neither run starved: the machine was busy; rerun when it is quiet")
print("(CPU ms/step: median CPU time of the process per step, all threads, spin-waiting included; outliers: timed"
      " steps slower than 1.5x their impl's median, kept; busy runs: started while other processes kept >= 25% of"
      " the CPUs busy; starved runs: the process kept < 75% of its threads busy: at full size, another process had a"
      " core; a tiny model (--small) may not fill its threads by itself; peak RSS: the largest peak resident set of"
      " the impl's processes over the rounds, whole process: runtime, libraries, model, optimizer and activations)")
EOF
}
if [[ -n $REPORT ]]; then report "$REPORT"; exit 0; fi

# --- build ---------------------------------------------------------------------------------------
if ((BUILD)); then
  [[ -f $BUILD_DIR/build.ninja || -f $BUILD_DIR/Makefile ]] || cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$BUILD_DIR" --target normlab_bench_train >&2
fi
BENCH=$BUILD_DIR/bench/normlab_bench_train
[[ -x $BENCH ]] || { echo "run.sh: $BENCH not found (build it, or pass --build-dir)" >&2; exit 1; }
[[ -x $PY ]] && "$PY" -c 'import torch' 2>/dev/null ||
  { echo "run.sh: $PY cannot import torch: apt-get install python3-torch" >&2; exit 1; }

# --- torch's best setup (shared/spec/benchmarking.md) --------------------------------------------
# torch 1.13's fp32 matmuls go to libblas.so.3. Debian's default is the netlib *reference* BLAS
# (about 40x slower here), so unless libblas.so.3 already is OpenBLAS we point the torch process
# alone at OpenBLAS (pthread build): the system's if libopenblas0-pthread is installed, otherwise a
# copy unpacked into the build dir with `apt-get download` (the system is not changed).
openblas_dir() {
  local d
  for d in /usr/lib/x86_64-linux-gnu/openblas-pthread "$BUILD_DIR/bench/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread"; do
    [[ -f $d/libblas.so.3 ]] && { echo "$d"; return 0; }
  done
  return 1
}
TORCH_LD_PATH=""
system_blas=$(readlink -f "$(ldconfig -p | awk '/libblas\.so\.3 .*x86-64/ {print $NF; exit}')" 2>/dev/null || true)
if ((SYSTEM_BLAS)) || [[ $system_blas == *openblas* ]]; then
  BLAS_DESC="system ($system_blas)"
else
  if ! OB=$(openblas_dir); then
    echo "run.sh: libblas.so.3 is the reference BLAS; fetching OpenBLAS into $BUILD_DIR/bench/openblas" >&2
    tmp=$(mktemp -d)
    if (cd "$tmp" && apt-get download libopenblas0-pthread >&2) && dpkg -x "$tmp"/libopenblas0-pthread_*.deb "$BUILD_DIR/bench/openblas"; then
      rm -rf "$tmp"; OB=$(openblas_dir)
    else
      rm -rf "$tmp"
      echo "run.sh: could not fetch OpenBLAS: apt-get install libopenblas0-pthread, or pass --system-blas to time" \
           "torch on the reference BLAS (not a fair comparison)" >&2
      exit 1
    fi
  fi
  TORCH_LD_PATH=$OB
  BLAS_DESC="OpenBLAS ($OB)"
fi
TORCH_ENV=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 OMP_WAIT_POLICY=PASSIVE
           OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS")
# OpenBLAS 0.3.21 does not know this CPU family (AMD family 1Ah) and runs its AVX2 (Haswell) kernels,
# as it also does when OPENBLAS_CORETYPE=Haswell is set in the environment (this workplace sets it);
# its AVX-512 (SkylakeX) kernels are faster wherever the CPU has AVX-512, so those are the default
# here. `--torch-env OPENBLAS_CORETYPE=Haswell` (later assignments win) times the other choice.
grep -qw avx512f /proc/cpuinfo && TORCH_ENV+=(OPENBLAS_CORETYPE=SkylakeX)
[[ -n $TORCH_LD_PATH ]] && TORCH_ENV+=(LD_LIBRARY_PATH="$TORCH_LD_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
TORCH_ENV+=("${TORCH_ENV_EXTRA[@]}")
# Both sides get the same OpenMP wait policy. With libgomp's default (spin ~300k iterations at every
# barrier when threads <= CPUs), a step of normlab's many short parallel regions slows down 3-100x as
# soon as another process takes a core; PASSIVE costs it little on an idle machine (README.md).
# --normlab-plain runs normlab in the inherited environment instead.
NORMLAB_ENV=()
((NORMLAB_PLAIN)) || NORMLAB_ENV+=(OMP_WAIT_POLICY=PASSIVE)
NORMLAB_ENV+=("${NORMLAB_ENV_EXTRA[@]}")

# --- measure: A B A B ... ------------------------------------------------------------------------
# The machine may be shared (builds, tests): before each run, wait up to WAIT_QUIET seconds for a
# one-second window in which less than a quarter of the CPUs are busy. A run that had to start on a
# busy machine is marked "busy" in the report; one that lost a core while it ran, "starved".
busy_percent() {  # CPU busy percentage over the next second, all CPUs together
  local a b
  read -r -a a < <(head -1 /proc/stat); sleep 1; read -r -a b < <(head -1 /proc/stat)
  local total=0 idle i
  for ((i = 1; i < ${#a[@]}; ++i)); do total=$((total + b[i] - a[i])); done
  idle=$((b[4] - a[4] + b[5] - a[5]))
  echo $(((total - idle) * 100 / (total > 0 ? total : 1)))
}
wait_quiet() {  # prints the busy percentage the run started at
  local waited=0 busy
  busy=$(busy_percent)
  while ((busy >= 25 && waited < WAIT_QUIET)); do busy=$(busy_percent); waited=$((waited + 1)); done
  echo "$busy"
}

if COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
  git -C "$ROOT" diff --quiet HEAD -- src || COMMIT="$COMMIT + uncommitted changes in src/"
else
  COMMIT=${NORMLAB_COMMIT:-"(not a git checkout)"}
fi
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
"$PY" - "$(lscpu | sed -n 's/^Model name: *//p' | head -1)" "$(nproc)" "$COMMIT" "$BLAS_DESC" \
      "${NORMLAB_ENV[*]}" "${TORCH_ENV[*]}" >"$RESULTS" <<'EOF'
import json, sys, torch
keys = ("cpu", "cpus", "commit", "blas", "normlab_env", "torch_env")
print(json.dumps({"impl": "meta", "torch": torch.__version__, **dict(zip(keys, sys.argv[1:]))}))
EOF

common=(--threads "$THREADS" --steps "$STEPS" --warmup "$WARMUP" "${MODEL_ARGS[@]}")
tag() { sed "s/^{/{\"round\":$1,\"busy_at_start\":$2,/"; }
for ((r = 1; r <= ROUNDS; ++r)); do
  busy=$(wait_quiet); echo "round $r/$ROUNDS: normlab (machine ${busy}% busy before)" >&2
  env "${NORMLAB_ENV[@]}" "$BENCH" "${common[@]}" "${NORMLAB_PRECISION[@]}" | tag "$r" "$busy" >>"$RESULTS"
  busy=$(wait_quiet); echo "round $r/$ROUNDS: torch (machine ${busy}% busy before)" >&2
  env "${TORCH_ENV[@]}" "$PY" "$ROOT/bench/torch_train.py" "${common[@]}" "${TORCH_PRECISION[@]}" | tag "$r" "$busy" >>"$RESULTS"
done
[[ -n $OUT ]] && cp "$RESULTS" "$OUT"
report "$RESULTS"
