#pragma once
// What the studies share: the small model they train, finding runs, deciding claims over seeds,
// reading what a run wrote (losses, probes, analyses), and the table of training outcomes.
#include <fmt/ranges.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "study/report.h"
#include "study/runner.h"
#include "study/studies.h"

namespace normlab::study {

// A small decoder LM on the configured corpus: d 64, 4 heads, d_ff 256, T 64, batch 16, GPT-2 init;
// Adam (β2 0.98) at lr 1e-3, constant after `warmup`, no clipping or weight decay; probes every
// `probe_every` steps (0: off); the loss logged every 10 steps or more often, at least 8 times; one
// validation pass at the end (plan_study sets when it checkpoints).
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

// ---- Deciding over seeds ------------------------------------------------------------------------
// Every sub-claim is decided on per-seed numbers, never on one seed or on a bare comparison of means.
// A SeedValues holds one quantity for each seed of the study, in the order of StudyOptions::seeds, so
// two of them are paired by seed (the same seed's init, batches and data order on both sides).
//
// The rule, in one place (decide_greater / decide_side in kit.cpp):
//  * "a > b" (paired): holds when a > b on every seed AND mean(a) − mean(b) > the pooled seed sd
//    √((sd_a² + sd_b²)/2); fails when a > b on no seed; otherwise unclear (the seeds disagree, or
//    they agree but the gap is within the seed-to-seed noise).
//    Why: the per-seed direction alone can hold by luck when the gap is tiny against the noise
//    (with 3 seeds a coin-flip effect agrees on all of them 1 time in 4); asking the mean gap to
//    exceed one pooled sd as well asks for an effect at least as large as the seed noise, the
//    scale on which a fresh seed could flip it. Failing needs the opposite on every seed, so one
//    stray seed makes a claim unclear, never refuted.
//  * "x > t", "x < t", "lo < x < hi" (a threshold the claim states): holds when every seed is on the
//    claimed side, fails when none is, unclear when they are mixed. The threshold already states
//    the effect size, so no further margin is asked.
//  * ratios and differences of two quantities are formed per seed (ratio, difference), then
//    decided against their threshold by the second rule.
//  * with one seed the sd is 0 and both rules reduce to the direction on that seed; the evidence
//    then says "1 seed: indicative".
//  * a NaN on any seed (a run failed, a record is missing) makes the claim undecided. An infinite
//    value (a diverged run counted as ∞ loss) compares as a number; the gap is then infinite.
struct SeedValues {
  std::vector<int> seeds;
  std::vector<double> values;  // values[i] belongs to seeds[i]; NaN where missing
  size_t n() const { return values.size(); }
  bool complete() const;  // at least one seed and no NaN
  double mean() const;    // NaN unless complete
  double sd() const;      // sample sd (n − 1); 0 for one seed; NaN unless complete or with an infinite value
  // "mean ± sd (n seeds)", "mean (1 seed: indicative)", or "n/a (seed 2 missing)".
  std::string show() const;
};
SeedValues over_seeds(const std::vector<int>& seeds, const std::function<double(int)>& value);
// f(a_i, b_i) seed by seed (the two must hold the same seeds).
SeedValues paired(const SeedValues& a, const SeedValues& b, const std::function<double(double, double)>& f);
SeedValues ratio(const SeedValues& a, const SeedValues& b);       // a_i / b_i
SeedValues difference(const SeedValues& a, const SeedValues& b);  // a_i − b_i
SeedValues each(const SeedValues& a, const std::function<double(double)>& f);

// The decisions (the rule above). decide_greater(a, b): "a > b" paired by seed.
Truth decide_greater(const SeedValues& a, const SeedValues& b);
inline Truth decide_less(const SeedValues& a, const SeedValues& b) { return decide_greater(b, a); }
Truth decide_above(const SeedValues& x, double threshold);        // every seed > threshold
Truth decide_below(const SeedValues& x, double threshold);        // every seed < threshold
Truth decide_between(const SeedValues& x, double lo, double hi);  // every seed in (lo, hi)
// Per seed, whether a claim holds on it (a claim that is not a comparison, e.g. "the run trained"):
// holds when it holds on every seed, fails when on none, unclear when mixed, undecided if any is.
Truth decide_each(const std::vector<Truth>& per_seed);
// The rule as a sentence, for verdict_rule texts.
inline constexpr const char* kSeedRule =
    "Every number is per seed and shown as mean ± sd over the seeds. \"a > b\" holds when a > b on every seed "
    "and the mean gap exceeds the pooled seed sd √((sd_a² + sd_b²)/2), fails when a > b on no seed, and is "
    "unclear otherwise; \"x > t\" against a stated threshold (ratios and differences formed per seed) holds "
    "when every seed is past t, fails when none is, unclear when they are mixed. One seed: the direction on "
    "that seed, indicative only. An unclear sub-claim makes the verdict inconclusive.";

// Single-number comparisons, NaN-aware: undecided when either side is NaN, so a missing number is
// evidence neither for nor against a claim. For one number that is not per seed (a check); a
// sub-claim over seeds is decided with the decide_* functions above.
Truth greater(double a, double b);
Truth less(double a, double b);
Truth between(double x, double lo, double hi);  // lo < x < hi
// An evidence line's conclusion: `holds`, `fails`, "cannot decide: a number is missing", or for an
// unclear claim "unclear over the seeds (...)".
std::string said(Truth t, std::string_view holds = "holds", std::string_view fails = "does not hold");

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
  std::string outcome;  // trained | slow | stalled | diverged | failed | missing
  double final_loss = NAN, val_loss = NAN, unigram = NAN;
  double seconds = NAN;  // the training's wall time (summary.json)
  double bleu = NAN;     // an encoder-decoder's greedy BLEU on held-out pairs (summary.json)
  // Whether the run learned: holds if trained or slow (still learning), fails if stalled or diverged,
  // undecided if it failed or is missing.
  Truth learned() const;
};
// A finished run whose final training loss is above the unigram entropy − 0.25 nats is stalled if its
// loss has plateaued (the last quarter of the logs is < 0.1 nats below the quarter before), else slow:
// still learning, only short of budget. Measured on the warm-up grid: stalled runs moved < 0.04 nats,
// slow ones 0.35–0.39. A finished run without those numbers (no logged loss, no summary.json) failed.
TrainResult train_result(const RunOutcome* run);
// A run's final validation loss, a diverged run counting as +∞ (it reached no loss at all); NaN if it failed or is
// missing, so the decide_* rules leave the claim undecided.
double val_loss_or_infinity(const RunOutcome* run);
// A cell of a grid over seeds: its worst outcome (missing > diverged > failed > stalled > slow > trained) and the
// mean final training and validation losses (NaN unless every seed has them); id_of_seed names each seed's run.
TrainResult worst_over_seeds(const std::vector<RunOutcome>& runs, const std::vector<int>& seeds,
                             const std::function<std::string(int)>& id_of_seed);
// The class of a finished run's curve by that rule: trained | slow | stalled (the unigram entropy from its
// summary.json; NaN counts as trained). `normlab serve` shows the same class for runs outside studies.
std::string finished_outcome(const TrainCurve& curve, double unigram);
inline constexpr const char* kStalledRule =
    "stalled = finished with a final training loss (mean of the last 3 logs) above the corpus's unigram entropy − 0.25 "
    "nats and a plateau (the last quarter of the logged losses < 0.1 nats below the quarter before); slow = above that "
    "line but still falling";
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

double mean(const std::vector<double>& v);
std::string num(double v);  // 3 decimals, or 3 significant digits when small

}  // namespace normlab::study
