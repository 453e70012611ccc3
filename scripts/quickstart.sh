#!/usr/bin/env bash
# The main job on the built-in default: sets everything up (building the normlab binary alone), trains the
# default Pre-LN model on the King James Bible and compares its validation loss with the val split's unigram
# cross-entropy, samples from it, then runs the flagship study "why Pre-LN won" and prints its verdict, its
# sub-claims with their intervals, and where its report is. It ends with a time line of its phases.
# Extra arguments go to `normlab train` (e.g. --set model.placement=post).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh --normlab-only | tee /tmp/normlab-quickstart-setup.$$
setup_line=$(grep '^setup: packages' /tmp/normlab-quickstart-setup.$$ || true)
rm -f /tmp/normlab-quickstart-setup.$$
t_setup=$(date +%s)
run="runs/quickstart-$(date +%Y%m%d-%H%M%S)"
build/normlab train --run "$run" "$@"
build/normlab generate --run "$run" --prompt "And God said" --tokens 40
t_train=$(date +%s)
build/normlab study why-pre-ln --jobs 2 --out "$run/study-why-pre-ln"
t_study=$(date +%s)
echo
echo "time line: setup $((t_setup - start)) s (${setup_line#setup: }), training and sampling $((t_train - t_setup)) s," \
  "flagship study $((t_study - t_train)) s; total $(((t_study - start) / 60)) min $(((t_study - start) % 60)) s"
echo "look at it live: build/normlab serve runs   (then open the address it prints)"
