#!/usr/bin/env bash
# The main job on the built-in default: sets everything up, trains the default Pre-LN model on the
# King James Bible (~3 min on 2 cores) and compares its validation loss with the val split's unigram
# cross-entropy, then runs the flagship study "why Pre-LN won" (~5 min) and prints where its report is.
# Extra arguments go to `normlab train` (e.g. --set model.placement=post).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
run="runs/quickstart-$(date +%Y%m%d-%H%M%S)"
build/normlab train --run "$run" "$@"
build/normlab generate --run "$run" --prompt "And God said" --tokens 40
build/normlab study why-pre-ln --jobs 2 --out "$run/study-why-pre-ln"
