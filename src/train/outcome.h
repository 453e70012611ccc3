#pragma once
// How a finished training run is classed from its logged losses, by the one rule the studies' tables and the live
// view share: trained (it learned more than token frequencies), stalled (it did not and has stopped falling) or
// slow (it did not yet, and is still falling: short of budget, not unstable).
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace normlab::train {

// A run's logged training losses (metrics.jsonl's train records).
struct TrainCurve {
  std::vector<double> step, loss;
  double final_loss() const;   // mean of the last three logged losses (NaN if none)
  double recent_drop() const;  // mean loss of the next-to-last quarter of the logs minus the last quarter's
};
TrainCurve read_train_curve(const std::filesystem::path& run_dir);

// What became of a training run, from best to worst (a grid cell over seeds shows its worst seed's). Finished runs are
// trained, slow or stalled by stalled_rule(); a run whose numbers went non-finite diverged; one that ended without
// its numbers (a crash, no logged loss) failed; a planned run with no folder is missing.
enum class Outcome { trained, slow, stalled, failed, diverged, missing };
inline constexpr Outcome kOutcomes[] = {Outcome::trained, Outcome::slow,     Outcome::stalled,
                                        Outcome::failed,  Outcome::diverged, Outcome::missing};
// The one spelling of each outcome (reports, tables' row colours, the live view, JSON).
std::string_view outcome_name(Outcome outcome);

// A run has learned more than token frequencies when its final loss is at least this far below the corpus's unigram
// entropy (nats); above that line, it has stopped falling when its last quarter of logs is less than kPlateauDrop
// below the quarter before.
inline constexpr double kStallMargin = 0.25, kPlateauDrop = 0.1;
// trained | slow | stalled by stalled_rule(), against the corpus's unigram entropy (NaN counts as trained).
Outcome finished_outcome(const TrainCurve& curve, double unigram);
// The rule in words, with its two constants, for reports.
std::string stalled_rule();

}  // namespace normlab::train
