#pragma once
// Learning-rate schedules. step counts optimizer updates from 1.
//   constant: lr
//   cosine:   linear warm-up to lr, then cosine decay to min_lr_ratio·lr at the last step
//   linear:   linear warm-up, then linear decay to min_lr_ratio·lr
//   noam:     lr · min(step/warmup, √(warmup/step))  (Vaswani's inverse-sqrt, normalized to peak at lr)
#include "train/train_config.h"

namespace normlab::train {

double learning_rate(const TrainConfig& c, int step);

}  // namespace normlab::train
