#!/usr/bin/env bash
# Builds an English-Spanish parallel corpus from two Debian SWORD Bibles, the King James Version
# (engKJV2006eb, package sword-text-kjv) and the Reina-Valera 1909 (spaRV1909eb, package sword-text-sparv),
# into data/kjv-rv.tsv: one line per verse that has text in both, "reference<TAB>english<TAB>spanish",
# in the KJV's order, about 31,084 lines and 8.5 MB. Does nothing if the file exists.
# The RV module is filed under KJV verse numbers but keeps some of its own divisions, so a few chapters
# pair verses off by one to five (Numbers 13 and 30, I Samuel 24, Job 39 and 41, Hosea 12, Jonah 2 and
# their neighbours, about 570 pairs, where the RV leaves a KJV verse empty or runs two into one).
# Usage: scripts/get-bible-pairs.sh [output-file]   (default data/kjv-rv.tsv, relative to the repository)
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-data/kjv-rv.tsv}"
if [ -s "$out" ]; then
  echo "get-bible-pairs: $out already exists ($(wc -l <"$out") lines); delete it to extract again"
  exit 0
fi
if ! command -v mod2imp >/dev/null 2>&1; then
  echo "get-bible-pairs: the 'mod2imp' program (Debian package libsword-utils) is missing: run scripts/setup.sh" >&2
  exit 1
fi

mkdir -p "$(dirname "$out")"
tmp="$out.tmp"
en="$out.en.tmp"
es="$out.es.tmp"
trap 'rm -f "$tmp" "$en" "$es"' EXIT

# mod2imp -s prints each entry as a "$$$Genesis 1:1" key line followed by its text with the markup stripped.
export_module() {  # module package file
  if ! mod2imp "$1" -s >"$3" 2>/dev/null; then
    echo "get-bible-pairs: mod2imp cannot read the SWORD module $1 (Debian package $2): run scripts/setup.sh" >&2
    exit 1
  fi
}
export_module engKJV2006eb sword-text-kjv "$en"
export_module spaRV1909eb sword-text-sparv "$es"

# Keeps only verse keys "Book N:M" with N, M >= 1 (the module, testament, book and chapter intros are
# "[ ... ]", "N:0" and "0:0"). What -s leaves of the markup goes: Strong's numbers "<G3588>" (in the RV),
# pilcrows "¶" and the USFM divine-name marker "\nd" (in the KJV). Whitespace is collapsed, and a space
# before , . ; : ! ? is dropped (the Strong's numbers leave some). The RV is read first into a table,
# then the KJV is walked in its own order, printing the verses that both have.
LC_ALL=C awk '
  function clean(s) {
    gsub(/<[GH][0-9]+[a-z]?>/, "", s)
    gsub(/\302\266/, "", s)
    gsub(/\\nd\*?/, "", s)
    gsub(/[ \t\r]+/, " ", s)
    while (match(s, / [,.;:!?]/)) s = substr(s, 1, RSTART - 1) substr(s, RSTART + 1)
    sub(/^ /, "", s)
    sub(/ $/, "", s)
    return s
  }
  function flush() {
    if (key != "") {
      text = clean(text)
      if (text != "") {
        if (file == 1) es[key] = text
        else if (key in es) print key "\t" text "\t" es[key]
      }
    }
    key = ""
    text = ""
  }
  FNR == 1 { flush(); file++ }
  /^\$\$\$/ {
    flush()
    k = substr($0, 4)
    if (k ~ /^[A-Za-z][A-Za-z ]* [1-9][0-9]*:[1-9][0-9]*$/) key = k
    next
  }
  key != "" { text = text " " $0 }
  END { flush() }
' "$es" "$en" >"$tmp"

pairs=$(wc -l <"$tmp")
if [ "$pairs" -lt 30000 ]; then
  echo "get-bible-pairs: only $pairs aligned verses (expected about 31084): reinstall sword-text-kjv," \
    "sword-text-sparv and libsword-utils (scripts/setup.sh)" >&2
  exit 1
fi
mv "$tmp" "$out"
rm -f "$en" "$es"
trap - EXIT
echo "get-bible-pairs: wrote $out ($pairs verse pairs, $(wc -c <"$out") bytes)"
