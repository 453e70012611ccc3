// Learning-rate schedules (src/train/schedule.h) at their landmarks.
#include "train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "model/presets.h"
#include "train/train_config.h"

namespace normlab::train {
namespace {

TrainConfig schedule(const std::string& name, int steps = 100, int warmup = 10, double lr = 2e-3,
                     double min_ratio = 0.1) {
  TrainConfig c;
  c.schedule = name;
  c.steps = steps;
  c.warmup = warmup;
  c.lr = lr;
  c.min_lr_ratio = min_ratio;
  return c;
}

TEST(TrainSchedule, WarmupIsLinearFromLrOverWarmup) {
  for (const char* name : {"constant", "cosine", "linear"}) {
    SCOPED_TRACE(name);
    const TrainConfig c = schedule(name);
    EXPECT_DOUBLE_EQ(learning_rate(c, 1), 2e-3 / 10);
    EXPECT_DOUBLE_EQ(learning_rate(c, 5), 2e-3 * 5 / 10);
    EXPECT_DOUBLE_EQ(learning_rate(c, 9), 2e-3 * 9 / 10);
    EXPECT_DOUBLE_EQ(learning_rate(c, 10), 2e-3) << "the peak is reached at step = warmup";
    for (int s = 2; s <= 10; ++s) EXPECT_GT(learning_rate(c, s), learning_rate(c, s - 1)) << "step " << s;
  }
}

TEST(TrainSchedule, ConstantStaysAtLr) {
  const TrainConfig c = schedule("constant");
  for (int s : {10, 11, 50, 100, 1000}) EXPECT_DOUBLE_EQ(learning_rate(c, s), 2e-3) << "step " << s;
  EXPECT_DOUBLE_EQ(learning_rate(schedule("constant", 100, 0), 1), 2e-3) << "no warm-up";
}

TEST(TrainSchedule, CosineDecaysToMinLrRatioAtTheLastStep) {
  const TrainConfig c = schedule("cosine");
  const double floor = 0.1 * 2e-3;
  EXPECT_DOUBLE_EQ(learning_rate(c, 100), floor);
  EXPECT_DOUBLE_EQ(learning_rate(c, 55), floor + (2e-3 - floor) * 0.5) << "halfway through the decay";
  const double progress = (30.0 - 10) / 90;
  EXPECT_DOUBLE_EQ(learning_rate(c, 30), floor + (2e-3 - floor) * 0.5 * (1 + std::cos(std::numbers::pi * progress)));
  EXPECT_DOUBLE_EQ(learning_rate(c, 150), floor) << "past the end it stays at the floor";
  for (int s = 11; s <= 100; ++s) EXPECT_LT(learning_rate(c, s), learning_rate(c, s - 1)) << "step " << s;
  EXPECT_DOUBLE_EQ(learning_rate(schedule("cosine", 100, 10, 2e-3, 0.0), 100), 0.0);
}

TEST(TrainSchedule, LinearDecaysToMinLrRatio) {
  const TrainConfig c = schedule("linear");
  const double floor = 0.1 * 2e-3;
  EXPECT_DOUBLE_EQ(learning_rate(c, 100), floor);
  EXPECT_DOUBLE_EQ(learning_rate(c, 55), floor + (2e-3 - floor) * 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(c, 40), floor + (2e-3 - floor) * (1 - 30.0 / 90));
  for (int s = 12; s <= 100; ++s)  // equal steps
    EXPECT_NEAR(learning_rate(c, s - 1) - learning_rate(c, s), (2e-3 - floor) / 90, 1e-15) << "step " << s;
}

TEST(TrainSchedule, NoamPeaksAtWarmupThenFallsAsInverseSqrt) {
  const TrainConfig c = schedule("noam", 1000, 16, 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(c, 16), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(c, 8), 1e-3 * 8 / 16);
  EXPECT_DOUBLE_EQ(learning_rate(c, 64), 1e-3 * 0.5) << "√(16/64)";
  EXPECT_DOUBLE_EQ(learning_rate(c, 400), 1e-3 * 0.2) << "√(16/400)";
  double peak = 0;
  int argmax = 0;
  for (int s = 1; s <= 1000; ++s) {
    if (learning_rate(c, s) > peak) peak = learning_rate(c, s), argmax = s;
  }
  EXPECT_EQ(argmax, 16);
  EXPECT_DOUBLE_EQ(learning_rate(schedule("noam", 100, 0, 1e-3), 4), 1e-3 / 2) << "no warm-up: lr/√step";
}

// The vaswani preset's train section makes the noam schedule Vaswani et al.'s §5.3 formula itself,
// d^−0.5 · min(step^−0.5, step · warmup^−1.5), at every step: the preset's lr is (d · warmup)^−0.5.
TEST(TrainSchedule, TheVaswaniPresetsNoamIsThePapersFormula) {
  const model::Preset& preset = model::find_preset("vaswani");
  const RunConfig c = read_run_config(Json{{"model", preset.model}, {"train", preset.train}}, "preset vaswani");
  EXPECT_EQ(c.train.schedule, "noam");
  EXPECT_EQ(c.train.warmup, 4000);
  const double d = c.model.d_model, warmup = c.train.warmup;
  for (int step : {1, 10, 1000, 3999, 4000, 4001, 6000, 8000}) {
    const double paper = std::pow(d, -0.5) * std::min(std::pow(step, -0.5), step * std::pow(warmup, -1.5));
    EXPECT_NEAR(learning_rate(c.train, step), paper, 1e-15) << "step " << step;
  }
}

}  // namespace
}  // namespace normlab::train
