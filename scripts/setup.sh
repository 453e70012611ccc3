#!/usr/bin/env bash
# normlab setup: installs every dependency from Debian packages, builds, and prepares the default
# corpus (the King James Bible from Debian's bible-kjv, tokenized into data/kjv) and the translation
# corpus (English-Spanish verse pairs from the SWORD Bibles, tokenized into data/kjv-rv).
# Usage: scripts/setup.sh [--with-torch] [--normlab-only]
#   --with-torch    adds python3-torch: the ToTorch.* tests, which scripts/test.sh runs, the fixtures and the
#                   benchmarks need it
#   --normlab-only  builds the normlab binary alone (the quickstart): no test suite, no benchmarks
# It ends with one line of phase times (packages, build, corpora), which scripts/quickstart.sh shows.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config chromium libjs-chart.js
          libdnnl-dev libsentencepiece-dev sentencepiece nlohmann-json3-dev libcli11-dev libfmt-dev
          libgtest-dev libgmock-dev libcpp-httplib-dev bible-kjv clang-format
          openmpi-bin libopenmpi-dev  # mpirun: data-parallel training, distributed studies (docs/scaling.md)
          libsword-utils sword-text-kjv sword-text-sparv  # the parallel KJV / Reina-Valera 1909 corpus (docs/data.md)
          clang-14 libfuzzer-14-dev libomp-14-dev)  # the last three: scripts/fuzz.sh (libFuzzer targets)
targets=()
for arg in "$@"; do
  case "$arg" in
    --with-torch) packages+=(python3-torch python3-numpy) ;;
    --normlab-only) targets=(--target normlab) ;;
    *) echo "setup.sh: unknown option '$arg' (known: --with-torch, --normlab-only)" >&2; exit 2 ;;
  esac
done
t0=$(date +%s)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

t1=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build "${targets[@]}"
t2=$(date +%s)

scripts/get-kjv.sh
if [ ! -s data/kjv/meta.json ]; then
  build/normlab prepare --input data/kjv.txt --out data/kjv --vocab-size 4096
fi
scripts/get-bible-pairs.sh
if [ ! -s data/kjv-rv/meta.json ]; then
  build/normlab prepare --pairs --input data/kjv-rv.tsv --out data/kjv-rv --vocab-size 8000 --character-coverage 1
fi
t3=$(date +%s)
echo "setup: packages $((t1 - t0)) s, build $((t2 - t1)) s, corpora $((t3 - t2)) s"
