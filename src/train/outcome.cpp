#include "train/outcome.h"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "train/records.h"

namespace normlab::train {

double TrainCurve::final_loss() const {
  if (loss.empty()) return NAN;
  const size_t n = std::min<size_t>(3, loss.size());
  double s = 0;
  for (size_t i = loss.size() - n; i < loss.size(); ++i) s += loss[i];
  return s / static_cast<double>(n);
}

double TrainCurve::recent_drop() const {
  const size_t q = loss.size() / 4;
  if (q == 0) return NAN;
  double before = 0, last = 0;
  for (size_t i = 0; i < q; ++i) before += loss[loss.size() - 2 * q + i], last += loss[loss.size() - q + i];
  return (before - last) / static_cast<double>(q);
}

TrainCurve read_train_curve(const std::filesystem::path& run_dir) {
  TrainCurve c;
  for (const TrainRecord& r : read_train_records(run_dir)) {
    c.step.push_back(r.step);
    c.loss.push_back(r.loss);
  }
  return c;
}

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::trained:
      return "trained";
    case Outcome::slow:
      return "slow";
    case Outcome::stalled:
      return "stalled";
    case Outcome::failed:
      return "failed";
    case Outcome::diverged:
      return "diverged";
    case Outcome::missing:
      return "missing";
  }
  return "unknown";
}

std::string stalled_rule() {
  return fmt::format(
      "stalled = finished with a final training loss (mean of the last 3 logs) above the corpus's unigram entropy − "
      "{:g} nats and a plateau (the last quarter of the logged losses < {:g} nats below the quarter before); slow = "
      "above that line but still falling",
      kStallMargin, kPlateauDrop);
}

Outcome finished_outcome(const TrainCurve& curve, double unigram) {
  if (curve.final_loss() <= unigram - kStallMargin) return Outcome::trained;
  return curve.recent_drop() < kPlateauDrop ? Outcome::stalled : Outcome::slow;
}

}  // namespace normlab::train
