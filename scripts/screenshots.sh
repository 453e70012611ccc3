#!/usr/bin/env bash
# The README's two pictures, taken in headless Chromium (Debian's, installed by scripts/setup.sh) from what is in the
# repository, so that they are regenerated rather than hand-made:
#   docs/img/report.png     the flagship study's report on the design seeds (results/why-pre-ln/design/report.html)
#   docs/img/live-view.png  `normlab serve results/why-pre-ln`: the page of one of that study's training runs, with its
#                           loss curves and per-layer probe profiles
# Usage: scripts/screenshots.sh   (after scripts/setup.sh has built build/normlab)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/normlab ] || { echo "screenshots.sh: build/normlab is missing: run scripts/setup.sh" >&2; exit 2; }
command -v chromium >/dev/null || { echo "screenshots.sh: chromium is missing: run scripts/setup.sh" >&2; exit 2; }
study=results/why-pre-ln/design
run=design/runs/train-pre-L12-w250-s1
[ -f "$study/report.html" ] || { echo "screenshots.sh: $study/report.html is missing" >&2; exit 1; }
mkdir -p docs/img
profile=$(mktemp -d)
trap 'rm -rf "$profile"; [ -n "${server:-}" ] && kill "$server" 2>/dev/null || true' EXIT
shoot() {  # URL PNG WIDTH HEIGHT
  timeout -k 5 120 chromium --headless=new --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" --hide-scrollbars \
    --virtual-time-budget=8000 --window-size="$3,$4" --screenshot="$2" "$1" >/dev/null 2>&1
  [ -s "$2" ] || { echo "screenshots.sh: chromium wrote no $2" >&2; exit 1; }
  echo "wrote $2"
}
shoot "file://$PWD/$study/report.html" docs/img/report.png 1200 1500

port=$((20000 + RANDOM % 20000))
build/normlab serve results/why-pre-ln --port "$port" >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/api/index" >/dev/null && break; sleep 0.2; done
shoot "http://127.0.0.1:$port/run?path=$run" docs/img/live-view.png 1400 1300
