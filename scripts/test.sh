#!/usr/bin/env bash
# The test command: sets everything up (scripts/setup.sh), then runs the whole suite with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
ctest --test-dir build --output-on-failure --timeout 900
