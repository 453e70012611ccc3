#!/usr/bin/env bash
# The test command: sets everything up (scripts/setup.sh --with-torch: the ToTorch.* tests load models into
# PyTorch's own modules and fail without it), then runs the whole suite with CTest.
# Usage: scripts/test.sh              the whole suite (build/)
#        scripts/test.sh --sanitize   a fast subset under AddressSanitizer + UndefinedBehaviorSanitizer, any report
#                                     fatal (-fno-sanitize-recover=all), built by scripts/hardening-build.sh (clang-14, -O1): the readers' fuzz
#                                     replays, io, engine ops, the model's init and fixture tests, train (checkpoints,
#                                     resume, the kill soak, write failures) and the CLI's end-to-end and error tests
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    *) echo "test.sh: unknown option '$arg' (known: --sanitize)" >&2; exit 2 ;;
  esac
done
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
if [ $sanitize -eq 0 ]; then
  scripts/setup.sh --with-torch
  ctest --test-dir build --output-on-failure --timeout 900
  exit 0
fi

start=$(date +%s)
scripts/hardening-build.sh normlab normlab_tests fuzz_replays
built=$(date +%s)
# detect_leaks: every allocation must be freed; abort_on_error: a report is a failed test, never a warning.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The subset is what build-sanitize's normlab_tests holds (CMakeLists.txt, NORMLAB_SANITIZE), plus the fuzz
# replays; the layering checks build objects, not code to sanitize, and the benchmarks are not built there.
ctest --test-dir build-sanitize --output-on-failure --timeout 900 -j2 -E '^(Layering|Bench)\.'
echo "sanitize: built in $((built - start)) s, tests ran in $(($(date +%s) - built)) s"
