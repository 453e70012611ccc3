#pragma once
// How a finished training run is classed from its logged losses, by the one rule the studies' tables and the live
// view share: trained (it learned more than token frequencies), stalled (it did not and has stopped falling) or
// slow (it did not yet, and is still falling: short of budget, not unstable).
#include <filesystem>
#include <string>
#include <vector>

namespace normlab::train {

// A run's logged training losses (metrics.jsonl's train records).
struct TrainCurve {
  std::vector<double> step, loss;
  double final_loss() const;   // mean of the last three logged losses (NaN if none)
  double recent_drop() const;  // mean loss of the next-to-last quarter of the logs minus the last quarter's
};
TrainCurve read_train_curve(const std::filesystem::path& run_dir);

// trained | slow | stalled by kStalledRule, against the corpus's unigram entropy (NaN counts as trained).
std::string finished_outcome(const TrainCurve& curve, double unigram);
inline constexpr const char* kStalledRule =
    "stalled = finished with a final training loss (mean of the last 3 logs) above the corpus's unigram entropy − 0.25 "
    "nats and a plateau (the last quarter of the logged losses < 0.1 nats below the quarter before); slow = above that "
    "line but still falling";

}  // namespace normlab::train
