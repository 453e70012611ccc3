#!/usr/bin/env bash
# Extracts the King James Bible (Debian package bible-kjv) into data/kjv.txt: one verse per line,
# without the "Ge1:1 " reference, 31,102 lines, about 4.1 MB. Does nothing if the file exists.
# Usage: scripts/get-kjv.sh [output-file]      (default data/kjv.txt, relative to the repository)
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-data/kjv.txt}"
if [ -s "$out" ]; then
  echo "get-kjv: $out already exists ($(wc -l <"$out") lines); delete it to extract again"
  exit 0
fi
if ! command -v bible >/dev/null 2>&1; then
  echo "get-kjv: the 'bible' program (Debian package bible-kjv) is missing: run scripts/setup.sh" >&2
  exit 1
fi

mkdir -p "$(dirname "$out")"
tmp="$out.tmp"
trap 'rm -f "$tmp"' EXIT
# -f: plain output, one verse per line as "Ge1:1 text"; stdin from /dev/null keeps it non-interactive.
bible -f gen1:1-rev22:21 </dev/null | cut -d' ' -f2- >"$tmp"

lines=$(wc -l <"$tmp")
if [ "$lines" -lt 31000 ]; then
  echo "get-kjv: bible printed only $lines lines (expected 31102): reinstall bible-kjv (scripts/setup.sh)" >&2
  exit 1
fi
mv "$tmp" "$out"
trap - EXIT
echo "get-kjv: wrote $out ($lines lines, $(wc -c <"$out") bytes)"
