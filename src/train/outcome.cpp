#include "train/outcome.h"

#include <algorithm>
#include <cmath>

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

std::string finished_outcome(const TrainCurve& curve, double unigram) {
  if (curve.final_loss() <= unigram - 0.25) return "trained";
  return curve.recent_drop() < 0.1 ? "stalled" : "slow";
}

}  // namespace normlab::train
