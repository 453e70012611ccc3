#!/usr/bin/env bash
# The long kill -9 soak: the CTest suite's soak tests with more kills. A training run (checkpoint every 2
# steps) is SIGKILLed at 30 random points of its progress (NORMLAB_SOAK_KILLS) and resumed each time, and the
# `normlab study` process of a quick study alone (not its process group: its runs' processes must die with it) at 10
# (NORMLAB_SOAK_STUDY_KILLS), rerun at once each time; each must end byte-identical to the uninterrupted run, and
# the study must report the same numbers with byte-identical checkpoints and logs.
# Usage: scripts/soak.sh   (after scripts/setup.sh has built build/)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/normlab_tests ] || { echo "soak.sh: build/normlab_tests is missing: run scripts/setup.sh" >&2; exit 2; }
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
export NORMLAB_SOAK_KILLS="${NORMLAB_SOAK_KILLS:-30}" NORMLAB_SOAK_STUDY_KILLS="${NORMLAB_SOAK_STUDY_KILLS:-10}"
start=$(date +%s)
build/normlab_tests --gtest_filter='KillSoak.*:StudyRunner.AStudyKilledAtRandomMomentsReportsTheUninterruptedNumbers'
echo "soak: $NORMLAB_SOAK_KILLS training kills and $NORMLAB_SOAK_STUDY_KILLS study kills passed in $(($(date +%s) - start)) s"
