#include "train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace normlab::train {

double learning_rate(const TrainConfig& c, int step) {
  const double s = step, warm = std::max(c.warmup, 0);
  if (c.schedule == "constant") return warm > 0 && s < warm ? c.lr * s / warm : c.lr;
  if (c.schedule == "noam") return warm > 0 ? c.lr * std::min(s / warm, std::sqrt(warm / s)) : c.lr / std::sqrt(s);
  if (warm > 0 && s < warm) return c.lr * s / warm;
  const double span = std::max(1.0, c.steps - warm);
  const double progress = std::clamp((s - warm) / span, 0.0, 1.0);
  const double floor = c.min_lr_ratio * c.lr;
  if (c.schedule == "linear") return floor + (c.lr - floor) * (1 - progress);
  return floor + (c.lr - floor) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

}  // namespace normlab::train
