#!/usr/bin/env bash
# The main job on the built-in default: sets everything up, then trains the default Pre-LN model on
# the King James Bible (a few minutes on 2 cores) and compares its validation loss with the corpus's
# unigram entropy. Extra arguments go to `normlab train` (e.g. --set model.placement=post).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
run="runs/quickstart-$(date +%Y%m%d-%H%M%S)"
build/normlab train --run "$run" "$@"
build/normlab generate --run "$run" --prompt "And God said" --tokens 40
