#!/usr/bin/env bash
# Builds TARGETS in build-sanitize: clang-14, AddressSanitizer + UndefinedBehaviorSanitizer (any report fatal),
# -O1 with line tables, and the libFuzzer coverage, so that scripts/test.sh --sanitize and scripts/fuzz.sh
# share one set of objects (CMakeLists.txt, NORMLAB_SANITIZE and NORMLAB_FUZZ). It is also the build without
# MPI (NORMLAB_MPI=OFF): its tests show a single-process normlab works and says so. Prints the build time.
# Usage: scripts/hardening-build.sh TARGET...
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang++-14 >/dev/null || { echo "hardening-build.sh: clang++-14 is missing: run scripts/setup.sh" >&2; exit 2; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
CC=clang-14 CXX=clang++-14 cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNORMLAB_SANITIZE=ON -DNORMLAB_FUZZ=ON -DNORMLAB_MPI=OFF "${launcher[@]}" >/dev/null
cmake --build build-sanitize --target "$@"
echo "hardening build: $* built in $(($(date +%s) - start)) s"
