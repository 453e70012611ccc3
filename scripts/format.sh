#!/usr/bin/env bash
# Formats the C++ sources with .clang-format (Debian's clang-format, installed by scripts/setup.sh).
# Usage: scripts/format.sh            rewrite the files in place
#        scripts/format.sh --check    list the files that differ and exit 1 (CI runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=(-i)
case "${1:-}" in
  --check) mode=(--dry-run --Werror) ;;
  "") ;;
  *) echo "format.sh: unknown option '$1' (known: --check)" >&2; exit 2 ;;
esac
command -v clang-format >/dev/null || { echo "format.sh: clang-format is missing: run scripts/setup.sh" >&2; exit 2; }
mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'tests/*.cpp' 'tests/*.h' 'tests/*.cxx' 'bench/*.cpp')
if [ "${mode[0]}" = -i ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format "${mode[@]}" "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format: ${#bad[@]} file(s) differ from .clang-format: ${bad[*]}" >&2
  echo "format: run scripts/format.sh to fix them" >&2
  exit 1
fi
echo "format: ${#files[@]} files match .clang-format"
