#pragma once
// `normlab study NAME --ladder AXIS=V1,V2,V3`: the study's preset run once per rung of one scale axis (train.steps,
// model.n_layers or model.d_model), each rung a study directory of its own (it resumes and reports like any study),
// and beside them a report of how each sub-claim's effect moves as the rung grows: whether it heads toward the side
// the paper claims. It is evidence beside the study's verdict at its preset and never changes it.
#include <filesystem>
#include <string>
#include <vector>

#include "study/claims.h"
#include "study/report.h"
#include "study/runner.h"
#include "study/studies.h"

namespace normlab::study {

// One rung: its value on the axis, the --set overrides that make it (after the user's, so they win), the --grid that
// makes it when the axis is one of the study's own (its values scaled so the largest is the rung; empty otherwise),
// its folder.
struct Rung {
  int value = 0;
  std::vector<std::string> overrides;
  std::string grid;
  std::filesystem::path dir;
};

struct Ladder {
  std::string axis;                // train.steps | model.n_layers | model.d_model
  std::vector<Rung> rungs;         // in ascending order
  std::vector<std::string> rules;  // how the fields that follow the axis follow it (a width's heads, d_ff, lr; a
                                   // study axis's values)
};

// The width rule: Adam's learning rate ∝ 1/width relative to the preset's (lr · d_model₀ / d_model), heads and d_ff in
// the preset's ratios to d_model (the head size stays the preset's).
extern const char* const kWidthRule;

// --ladder AXIS=V1,V2,...: the rungs of the study at `base` (its preset, seeds, --set and --grid, and base.dir the
// ladder's folder), each in base.dir/rung-AXIS-V. When AXIS is one of the study's own axes (why-pre-ln's
// model.n_layers: A compares its shallowest and deepest values, B and C train at the deepest), each rung replaces that
// axis's values (the preset's or --grid's) by the same values scaled so that the largest is the rung: {6, 12} climbs
// as {3, 6}, {6, 12}, {12, 24} for rungs 6, 12, 24. Fails with one sentence naming --ladder and the fix on: fewer than
// 3 values, another axis, a value that is not a positive whole number or comes twice, a field the study's arms set or a
// study-level axis sets, one --set also gives, train.steps in a study that trains nothing, a width the preset's head
// size or d_ff ratio does not divide, and a rung that scales the study's own axis to values that are not whole.
Ladder plan_ladder(const Study& study, const StudyOptions& base, const std::string& spec);

// The ladder's seeds: a fixed list (--seeds as parse_seeds reads it; without it 1,2,3), the same at every rung, one
// look per rung. Refuses --seeds auto (a rung adding seeds would break the pairing of seeds across rungs) and a single
// seed (the slopes' interval needs two).
void choose_ladder_seeds(StudyOptions& options, const std::string& seeds_text);

// Where a sub-claim's effect heads as the rung grows (the trend rule below).
enum class Direction { approaching, receding, flat, undecided };
// "approaching the paper's regime", "receding", "flat", "undecided".
const char* direction_name(Direction direction);

struct Trend {
  std::string fitted;  // what each slope is a slope of
  SeedValues slopes;   // one least-squares slope per seed, of `fitted` over log(rung)
  double confidence = 0.95;
  double lo = NAN, hi = NAN;  // the Student-t interval of the mean slope over the seeds (NaN: none)
  Direction direction = Direction::undecided;
  // "slope of the effect over log(rung): 0.41 ± 0.05 (3 seeds), interval [0.29, 0.53] (95%): approaching ...".
  std::string text() const;
};

// The trend rule. For each seed, the least-squares slope of its values over log(rung) across the rungs (per_rung[i]
// holds rung i's values, the same seeds at every rung); then the Student-t interval (student_t_quantile) of the mean
// of those slopes at `confidence`. For side above the slope is of the effect and toward the claimed side is positive;
// for below, of the effect, negative; for within (lo, hi), of the distance |effect − (lo + hi)/2| to the band's
// centre, negative (the effect closing in on the band's middle). An interval wholly toward the claimed side:
// approaching; wholly the other way: receding; one that holds 0: flat; a missing value or fewer than 2 seeds:
// undecided.
Trend trend_of(const std::vector<double>& rungs, const std::vector<SeedValues>& per_rung, SubClaim::Side side,
               double lo, double hi, double confidence = 0.95);

struct LadderResult {
  std::filesystem::path html;       // ladder.html
  std::vector<StudyResult> rungs;   // each rung's study, in ladder order
  std::vector<std::string> trends;  // one line per sub-claim: its trend and its first holding rung
};

// The ladder's report from its rungs' results (run nothing): a chart and a table per sub-claim, the trends, the first
// rung at which each sub-claim holds, with the ladder's facts in `record` (ladder.json).
Report ladder_report(const Study& study, const StudyOptions& base, const Ladder& ladder,
                     const std::vector<StudyResult>& rungs);

// `--preregistration --ladder`: each rung's pre-registration and hash as its report will state them (with --claims,
// only the followed arms), under a "## rung AXIS=V (setting)" line: what a ladder freezes, one "frozen NAME HASH" per
// rung, before it runs unseen seeds.
std::string ladder_preregistration_text(const Study& study, const StudyOptions& base, const Ladder& ladder);

// Runs every rung as a study (run_study: finished runs are reused), then writes ladder.html, ladder.md and
// ladder.json into base.dir.
LadderResult run_ladder(const Study& study, const StudyOptions& base, const Ladder& ladder,
                        const RunnerOptions& runner);

}  // namespace normlab::study
