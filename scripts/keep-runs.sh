#!/usr/bin/env bash
# Copies the ended runs of a study folder (those with a status.json that is not "failed") into another study
# folder without their tensor files and the CSV twins of their JSONL files (the checkpoint, the probes' reference logits: 300 MB for a 24-layer d 256
# run), small enough to commit: what a report is made from stays (metrics, probes, analyses, summary). A study
# given the copy as --out reuses them: a run is reused on its request.json and status.json alone, and only the
# runs still missing run (docs/studies.md, "The flagship's large preset, in pieces"). A run still going, or failed, is left out: it starts again from step 0 there.
# Usage: scripts/keep-runs.sh FROM_STUDY_DIR TO_STUDY_DIR
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: scripts/keep-runs.sh FROM_STUDY_DIR TO_STUDY_DIR" >&2
  exit 2
fi
from="$1/runs" to="$2/runs"
if [ ! -d "$from" ]; then
  echo "keep-runs.sh: $from does not exist: give the folder a study wrote (its --out), which holds runs/" >&2
  exit 1
fi
mkdir -p "$to"
kept=0 left=0
for run in "$from"/*/; do
  id=$(basename "$run")
  if [ ! -f "$run/status.json" ] || grep -q '"status": *"failed"' "$run/status.json"; then
    left=$((left + 1))
    continue
  fi
  rm -rf "$to/$id.partial"
  cp -a "$run" "$to/$id.partial"
  # probes.csv and analysis.csv hold the numbers of the .jsonl beside them (what the judges read), in long form
  find "$to/$id.partial" \( -name '*.safetensors' -o -name 'checkpoint.json' -o -name 'probes.csv' \
    -o -name 'analysis.csv' \) -delete
  rm -rf "$to/$id"
  mv "$to/$id.partial" "$to/$id"
  kept=$((kept + 1))
done
echo "keep-runs.sh: kept $kept ended runs in $to ($left running, failed or not started left out)"
