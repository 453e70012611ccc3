#pragma once
// Named experiments: each plans a grid of runs, then judges the claim from the measured numbers with
// a rule written in its report. `normlab study list` shows them; `normlab sweep` runs any user grid.
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "study/claim_spec.h"
#include "study/claims.h"
#include "study/report.h"
#include "study/runner.h"
#include "train/outcome.h"

namespace normlab::study {

struct StudyOptions {
  bool quick = false;      // the ~3-minute preset (tests use it)
  bool large = false;      // the cluster-sized preset: Study::large's overrides (use_large_preset)
  std::vector<int> seeds;  // the seeds every configuration runs with (at this look of --seeds auto)
  // --seeds auto (the default preset's): 3 seeds from first_seed, 2 more while a sub-claim is unclear, up to
  // max_seeds (run_study); `schedule` says how many looks the intervals account for (1 for fixed seeds).
  bool auto_seeds = false;
  int first_seed = 1, max_seeds = SeedSchedule::kDefaultCap;
  SeedSchedule schedule = {};
  bool judge_only = false;             // --judge-only: judge the runs stored in `dir` again, running nothing
  std::vector<std::string> overrides;  // key=value, applied to every run's config
  std::filesystem::path dir;           // the study directory
  std::string command_line;            // how the study was started, recorded in its report
  std::vector<std::string> grid = {};  // --grid KEY=V1,V2,...: replaces the values of one of the study's axes
  // --claims (a ladder's): follow only these sub-claims. Only the arms they read run, and the others are shown as not
  // followed, undecided. Empty: every sub-claim.
  std::vector<std::string> claims = {};
  // Each axis's values (the preset's, or --grid's), filled in by plan_study and judge_study.
  std::map<std::string, std::vector<Json>> axes = {};

  // An axis's values; fails if the study declares no such axis.
  const std::vector<Json>& axis(const std::string& key) const;
  std::vector<int> int_axis(const std::string& key) const;
  std::vector<double> number_axis(const std::string& key) const;
  std::vector<std::string> text_axis(const std::string& key) const;
  // Whether --claims follows the sub-claim (every one when --claims is empty).
  bool follows(const std::string& claim_id) const;
};

// One axis of a study's grid, declared in data: `normlab study NAME --help` lists it, `--grid KEY=...`
// replaces its values, and a `--set` of its key (or of the config field it sets) is refused.
struct Axis {
  std::string_view key;           // a run-config field (model.n_layers, train.lr) or a study-level name (init)
  std::string_view defaults;      // the default preset's values, comma-separated
  std::string_view quick;         // the --quick preset's values
  std::string_view large = "";    // the --large preset's values (empty: the default preset's)
  std::string_view description;   // one line: what the axis varies and how the judge uses it
  std::string_view choices = "";  // a study-level axis of names: the values it accepts, comma-separated
  std::string_view sets = "";     // a study-level axis: the config field it sets
};

// What every --large preset sets before its study's own overrides: d 256 with 4 heads, d_ff 1024 and a context of
// 128. A study whose arms set d_ff (stream-at-init) leaves d_ff out; one that reads sentence pairs (mt-depth) keeps
// their T 64.
enum class LargeSize { model_and_context, without_ffn, without_context };

struct Study {
  std::string_view name;
  std::string_view title, claim, source;  // the report's heading, the claim tested, the papers (with sections)
  // The regime the paper states its claim in (depth, width, lr and schedule, init, steps, data), with the sentence
  // or figure it comes from; --help and the report show it beside this preset's setup.
  std::string_view paper_setting = "";
  std::string_view cost;           // the presets' run time on 2 cores
  std::string_view headline = "";  // the sub-claim carrying the claim's main effect (empty: the first)
  // The default preset's seeds when --seeds is not given: "" for auto (3, then 2 more while a sub-claim is unclear),
  // or a fixed count, for a study whose counts need a planned number of seeds.
  std::string_view default_seeds = "";
  // The --large preset: where the claim lives as far as CPUs allow (d 256, T 128, 12-48 layers, thousands of
  // steps), meant for many cores (`mpirun ... normlab study NAME --large`): the shared size (large_size), then these
  // space-separated --set overrides, all before the user's, with each axis's `large` values. docs/studies.md states
  // its cost in core-hours.
  std::string_view large = "";
  LargeSize large_size = LargeSize::model_and_context;
  std::vector<Axis> axes = {};  // the grid's axes (none: fixed arms; --set changes what they share)
  std::function<std::vector<RunRequest>(const StudyOptions& options)> plan;
  // The sub-claims as data (claim_spec.h): the arms they name, the variables their templates use, and the
  // sub-claims themselves, which judge_study measures and whose rule it writes.
  std::vector<ArmSpec> arms = {};
  Variables variables = {};
  std::vector<ClaimSpec> sub_claims = {};
  // The report's setup (what is measured, beyond the runs' configs), evidence, charts and tables, and notes that
  // follow the sub-claims' rule (judge_study adds the rest). Arms are found by run id, never by position.
  std::function<Report(const StudyOptions& options, const std::vector<RunOutcome>& outcomes)> judge;
};

std::span<const Study* const> all_studies();
// --seeds: a count N (seeds 1..N), a list "101,102,103" or a range "101-103" of positive seeds, each
// seed once; anything else fails with a message naming --seeds.
std::vector<int> parse_seeds(const std::string& text);
// --seeds and --max-seeds into the options: "auto" or "auto:FIRST" (3 seeds from FIRST, default 1, then 2 at a
// time while a sub-claim is unclear, up to max_seeds, at least 3), or a fixed list as parse_seeds reads it
// (one look). Without --seeds: auto for the default preset, 1 seed for --quick, 3 for --large.
void choose_seeds(StudyOptions& options, const std::string& seeds_text, int max_seeds);
// "1–3", "101, 102, 104", "7".
std::string describe_seeds(const std::vector<int>& seeds);
const Study& find_study(std::string_view name);

// --large: puts the study's large-preset overrides before the user's --set (which win) and marks the options.
void use_large_preset(const Study& study, StudyOptions& options);
// The --large preset's overrides, in the order they apply.
std::vector<std::string> large_overrides(const Study& study);
// Training steps × layers (both stacks of an encoder-decoder) summed over a plan's training runs: the unit
// docs/studies.md prices the large presets in.
long long layer_steps(const std::vector<RunRequest>& requests);

// Fills options.axes from the study's presets and options.grid; fails, naming the study's axes, on a
// --grid key that is not one of them, and on a value of the wrong type.
void resolve_axes(const Study& study, StudyOptions& options);
// The study's help: title, claim, source, presets and cost, default seeds, axes, examples.
std::string study_help(const Study& study);

// The study's plan with the options' seeds, --grid axes and --set overrides applied. Fails before anything
// runs if an override names no config field or gives a value the field does not take, or sets a field the
// study varies between its runs (an axis: use --grid; an arm's field: the labels would lie). Every training run
// checkpoints every checkpoint_interval(train.steps) steps (unless --set train.checkpoint_every says
// otherwise), so a killed study resumes each interrupted run from its last checkpoint.
std::vector<RunRequest> plan_study(const Study& study, StudyOptions& options);
// A quarter of the run, at most 100 steps: a kill loses little, and at the studies' model sizes a
// checkpoint costs far less than 100 steps of training.
int checkpoint_interval(int steps);

// The values the templates of the study's data name, at these options (an empty object for a study without them).
Json study_variables(const Study& study, const StudyOptions& options);
// The rule of a study stated as data, one clause per sub-claim, generated from its ClaimSpecs.
std::string sub_claims_rule(const Study& study, const StudyOptions& options);

// The judge's report, failing closed: a run that failed makes the verdict incomplete, with the run
// and its error line listed, whatever the sub-claims say. Adds the setup generated from the runs'
// configs and the run directories.
Report judge_study(const Study& study, const StudyOptions& options, const std::vector<RunOutcome>& outcomes);
// The headline sub-claim in one line: statement, statistic, mean ± sd, threshold, interval and outcome.
std::string headline_text(const Report& report);

struct StudyResult {
  std::filesystem::path report;  // report.html
  std::filesystem::path index;   // studies.html beside the study's folder, refreshed
  std::string verdict;
  std::vector<std::string> failures;  // as in Report::failures
  std::vector<SubClaim> claims;       // decided
  std::string headline;               // the headline sub-claim's effect and interval, one line
};
// Runs a study end to end (grid, summary.csv, seeds.csv, report, the index of reports beside it); with
// --seeds auto, looks again with 2 more seeds while a sub-claim is unclear, up to the cap.
StudyResult run_study(const Study& study, const StudyOptions& options, const RunnerOptions& runner);

// Reading what runs wrote.
using train::read_train_curve;  // train/outcome.h
using train::TrainCurve;
// The last probes.jsonl record of `family` (empty JSON if none).
Json last_probe(const std::filesystem::path& run_dir, const std::string& family);
// The result columns of one analysis in a probe run's analysis.jsonl.
Json read_analysis(const std::filesystem::path& dir, const std::string& analysis);

}  // namespace normlab::study
