#pragma once
// What the studies share: the small model they train, finding runs, deciding claims over seeds,
// reading what a run wrote (losses, probes, analyses), and the table of training outcomes.
#include <fmt/ranges.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "study/claims.h"
#include "study/report.h"
#include "study/runner.h"
#include "study/studies.h"

namespace normlab::study {

using train::Outcome;  // what became of a training run (train/outcome.h), with its spellings and stall rule
using train::outcome_name;
using train::stalled_rule;

// A small decoder LM on the configured corpus: d 64, 4 heads, d_ff 256, T 64, batch 16, GPT-2 init;
// Adam (β2 0.98) at lr 1e-3, constant after `warmup`, no clipping or weight decay; probes every
// `probe_every` steps (0: off); the loss logged every 10 steps or more often, at least 8 times; one
// validation pass at the end (plan_study sets when it checkpoints).
// The model.n_layers axis, shallowest first.
std::vector<int> depths(const StudyOptions& o);

// How often a run of `steps` steps logs its loss: every 10 steps, but at least 8 logs (the stalled/slow rule compares
// the last two quarters of them).
int log_interval(int steps);
Json small_lm(const std::string& placement, int layers, int steps, uint64_t seed, int warmup = 0, int probe_every = 0);
// Xiong's regime (fairseq): Xavier matrices, embeddings N(0, d^-1/2) scaled by √d, so the stream
// starts with unit variance.
Json& use_xavier(Json& config);

// One configuration of a study (a placement, an init ...), run once per seed as "<id>-s<seed>".
struct Arm {
  const char* id;
  const char* label;
};
std::string seed_id(const std::string& arm, int seed);
// The size of a study's training runs.
struct TrainPreset {
  int layers, steps, probe_every = 0;
};

// The value a field of `config` takes once the --set overrides are applied (plan_study applies them after
// plan), so that what a plan derives from it (d_ff = k × d_model, warm-up = a fraction of train.steps)
// follows the user's value; the config's own (resolved) value if the overrides do not apply to it.
Json configured(const StudyOptions& o, Json config, const std::string& key);
// `value` (a warm-up or probe interval of a `preset_steps`-step run) scaled to a `steps`-step run: the
// same fraction of it, rounded, at least 1 unless `value` is 0.
int scaled(int value, int preset_steps, int steps);
// A training preset as the overrides leave it: model.n_layers and train.steps as configured,
// probe_every scaled with the steps (or as --set gives it). Plans and judges read their sizes from it.
TrainPreset configured(const StudyOptions& o, const TrainPreset& preset);

// One training run of small_lm per seed and arm, the arm's id being the placement: "<arm>-s<seed>",
// with `analyses` of its final checkpoint (none if empty).
std::vector<RunRequest> placement_runs(const std::vector<int>& seeds, std::span<const Arm> arms, const TrainPreset& p,
                                       int warmup, const std::string& analyses = "");

const RunOutcome* find_run(const std::vector<RunOutcome>& runs, const std::string& id);
// The mean of value(seed) over the seeds; NaN if any seed's value is NaN (a mean over fewer seeds
// than planned is not the number a rule states). For charts and tables: decide with SeedValues.
double seed_mean(const std::vector<int>& seeds, const std::function<double(int)>& value);
// The same element by element for per-layer values: `size` entries, each NaN unless every seed's
// values(seed) has a number there (a missing run returns an empty vector).
std::vector<double> seed_mean_each(const std::vector<int>& seeds, size_t size,
                                   const std::function<std::vector<double>(int)>& values);

// ---- Per-seed numbers ----------------------------------------------------------------------------
// Every sub-claim is decided on per-seed numbers (claims.h), never on one seed or a bare comparison of
// means. Ratios and differences of two arms are formed seed by seed (the arms of one seed share its init
// and data order).
SeedValues over_seeds(const std::vector<int>& seeds, const std::function<double(int)>& value);
// f(a_i, b_i) seed by seed (the two must hold the same seeds).
SeedValues paired(const SeedValues& a, const SeedValues& b, const std::function<double(double, double)>& f);
SeedValues ratio(const SeedValues& a, const SeedValues& b);       // a_i / b_i
SeedValues difference(const SeedValues& a, const SeedValues& b);  // a_i − b_i
SeedValues each(const SeedValues& a, const std::function<double(double)>& f);

// The runs' configs in one sentence, as --set keys: the model and training fields every run shares,
// every field that varies between runs (with its values), and every field an override set.
std::string config_summary(const std::vector<RunOutcome>& runs, const std::vector<std::string>& overrides);
// One analysis of a finished probe run (null if the run is missing or did not finish).
Json run_analysis(const RunOutcome* run, const std::string& analysis);
// The prefix of the layers a study reads in a run's model: `decoder.` when the run is an encoder-decoder (the stack
// the probes report), else none; and the name of layer `layer`'s tensor `rest` (e.g. "ffn.fc2.weight") under it,
// so that a study reads the same layers in every shape.
std::string_view layer_prefix(const RunOutcome* run);
std::string layer_tensor(const RunOutcome* run, int layer, std::string_view rest);
// A column of a finished probe run's analysis (empty if the run is missing or did not finish).
std::vector<double> analysis_column(const RunOutcome* run, const std::string& analysis, const std::string& column);

// What a training run reached: its final losses (NaN if missing) and the outcome class.
struct TrainResult {
  Outcome outcome = Outcome::missing;
  double final_loss = NAN, val_loss = NAN, unigram = NAN;
  double seconds = NAN;  // the training's wall time (summary.json)
  double bleu = NAN;     // an encoder-decoder's greedy BLEU on held-out pairs (summary.json)
};
// A finished run whose final training loss is above the unigram entropy − kStallMargin is stalled if its
// loss has plateaued (the last quarter of the logs is < 0.1 nats below the quarter before), else slow:
// still learning, only short of budget. Measured on the warm-up grid: stalled runs moved < 0.04 nats,
// slow ones 0.35–0.39. A finished run without those numbers (no logged loss, no summary.json) failed.
TrainResult train_result(const RunOutcome* run);
// A run's final training loss (mean of the last 3 logs) or validation loss, a diverged run counting as the corpus's
// unigram entropy: it learned nothing a table of token frequencies does not know. The finite stand-in keeps the
// seed's interval defined; it understates how bad a divergence is, so it can only weaken a claim that the run did
// worse. NaN if the run failed or is missing (the sub-claim is then undecided).
double final_loss_or_unigram(const RunOutcome* run);
double val_loss_or_unigram(const RunOutcome* run);
// "the unigram entropy − 0.25 nats", the trained line in words, from train::kStallMargin.
std::string trained_line();
// The statistic of a claim that a run learned (or did not): its final training loss minus the trained line, the
// unigram entropy − kStallMargin nats (stalled_rule()): below 0 it trained; a stalled run sits near +0.25, a diverged
// one at +0.25 exactly.
double loss_above_trained_line(const RunOutcome* run);
// A cell of a grid over seeds: its worst outcome (missing > diverged > failed > stalled > slow > trained) and the
// mean final training and validation losses (NaN unless every seed has them); id_of_seed names each seed's run.
TrainResult worst_over_seeds(const std::vector<RunOutcome>& runs, const std::vector<int>& seeds,
                             const std::function<std::string(int)>& id_of_seed);
// The class of a finished run's curve (train/outcome.h), which `normlab serve` shows too.
using train::finished_outcome;
// The table of training runs: run, outcome, final train loss, val loss, seconds; rows coloured.
Table outcome_table(const std::string& title, const std::vector<RunOutcome>& runs);

// Every probes.jsonl record of a family, in step order.
std::vector<Json> probe_records(const std::filesystem::path& run_dir, const std::string& family);
// A column of a record (or of an analysis result) as numbers.
std::vector<double> numbers(const Json& column);
// record[key] as a number; NaN when the record is not an object, lacks the key, or holds no number there.
double number(const Json& record, const std::string& key);
// record[key] as numbers; empty when the record is not an object or lacks the key.
std::vector<double> numbers(const Json& record, const std::string& key);
// The series y = record[column] against record["layer"].
Series layer_series(const std::string& label, const Json& record, const std::string& column);

// y against its index 0, 1, 2 ... (layers).
Series indexed_series(const std::string& label, const std::vector<double>& y);
// A training run's loss curve (empty if the run is missing).
Series loss_series(const std::string& label, const RunOutcome* run);
// Whether every seed of an arm trained (a stalled model's layers tell nothing about a trained one's);
// undecided if a seed failed or is missing.
Truth all_trained(const std::vector<RunOutcome>& runs, const std::string& arm, const std::vector<int>& seeds);
// An arm's final validation loss, per seed.
SeedValues val_losses(const std::vector<RunOutcome>& runs, const std::string& arm, const std::vector<int>& seeds);
// The same, averaged over seeds.
double mean_val_loss(const std::vector<RunOutcome>& runs, const std::string& arm, const std::vector<int>& seeds);

}  // namespace normlab::study
