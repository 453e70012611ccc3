// engine/fast_math.h against libm in double: the accuracy its header states, measured on a dense grid, and the
// special values a training run relies on (NaN must stay NaN so a diverged step is caught).
#include "engine/fast_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

namespace normlab::engine {
namespace {

constexpr double kUlp = 5.9604644775390625e-8;  // 2⁻²⁴: half the gap between fp32 numbers in [1, 2)

TEST(FastMath, ExpIsWithinTwoUlpOverTheWholeFloatRange) {
  double worst = 0, worst_x = 0;
  for (double x = -86.5; x <= 88.6; x += 1.0 / 1024 + 1e-7) {
    const auto xf = static_cast<float>(x);
    const double exact = std::exp(static_cast<double>(xf));
    const double error = std::fabs(fast_exp(xf) - exact) / exact;
    if (error > worst) worst = error, worst_x = xf;
  }
  EXPECT_LT(worst, 2 * kUlp) << "worst at x = " << worst_x;
}

TEST(FastMath, ExpKeepsNaNAndSaturatesLikeLibm) {
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fast_exp(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fast_exp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_EQ(fast_exp(1e-30), std::exp(1e-30)) << "fp64 is libm's";
}

// tanh against libm's in double over the range where it is not yet ±1 in fp32, and densely across the switch from
// the series to the exp form at |x| = 0.55, where the exp form's subtraction costs most.
TEST(FastMath, TanhIsWithinThreeUlpOfLibm) {
  double worst = 0, worst_x = 0;
  const auto check = [&](double x) {
    const auto xf = static_cast<float>(x);
    const double exact = std::tanh(static_cast<double>(xf));
    const double error = exact == 0 ? std::fabs(fast_tanh(xf)) : std::fabs(fast_tanh(xf) - exact) / std::fabs(exact);
    if (error > worst) worst = error, worst_x = xf;
  };
  for (double x = -10; x <= 10; x += 1.0 / 4096 + 1e-7) check(x);
  for (double x = 0.5; x <= 0.6; x += 1e-6) check(x), check(-x);
  for (double x = 1e-30; x < 1e-2; x *= 1.01) check(x), check(-x);
  EXPECT_LT(worst, 3 * kUlp) << "worst at x = " << worst_x;
}

TEST(FastMath, TanhKeepsNaNAndTheSignAndSaturatesToOne) {
  EXPECT_TRUE(std::isnan(fast_tanh(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fast_tanh(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(fast_tanh(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_EQ(fast_tanh(50.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-50.0f), -1.0f);
  EXPECT_EQ(fast_tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(fast_tanh(-0.0f)));
  EXPECT_EQ(fast_tanh(0.3), std::tanh(0.3)) << "fp64 is libm's";
}

// Φ's relative error by how far into the lower tail x goes: z² in fp32 costs accuracy there, yet far less than
// the 1 + erf(x/√2) form, which cancels to nothing (libm's erff gave relative errors of 5% at x = −5).
TEST(FastMath, NormalCdfIsAccurateIncludingTheLowerTail) {
  for (auto [lowest, bound] : {std::pair{-2.0, 1e-6}, {-5.0, 3e-6}, {-12.0, 2e-5}}) {
    double worst = 0, worst_abs = 0;
    for (double x = lowest; x <= 12; x += 1.0 / 2048 + 1e-7) {
      const auto xf = static_cast<float>(x);
      const double exact = 0.5 * std::erfc(-static_cast<double>(xf) / std::sqrt(2.0));
      const double error = std::fabs(normal_cdf(xf) - exact);
      worst = std::max(worst, error / exact);
      worst_abs = std::max(worst_abs, error);
    }
    EXPECT_LT(worst, bound) << "relative error for x >= " << lowest;
    EXPECT_LT(worst_abs, 4 * kUlp) << "absolute error for x >= " << lowest;
  }
}

TEST(FastMath, NormalCdfLimits) {
  EXPECT_EQ(normal_cdf(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(normal_cdf(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_TRUE(std::isnan(normal_cdf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_NEAR(normal_cdf(0.0f), 0.5f, kUlp);
  EXPECT_DOUBLE_EQ(normal_cdf(-1.0), 0.5 * std::erfc(1.0 / std::sqrt(2.0))) << "fp64 is libm's";
}

// GELU's tanh form as x·σ(2u) against the textbook ½x(1 + tanh u) in double (torch's approximate='tanh'): fp32's
// error stays within a few ulps of y, and the slope matches the double form's central difference.
TEST(FastMath, GeluTanhIsTheTanhFormToFloatRounding) {
  const auto textbook = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  };
  double worst = 0, worst_x = 0;
  for (double x = -12; x <= 12; x += 1.0 / 1024 + 1e-7) {
    const auto xf = static_cast<float>(x);
    const double exact = textbook(xf);
    const double error = std::fabs(gelu_tanh_of(xf) - exact) / std::max(std::fabs(exact), std::fabs(double(xf)));
    if (error > worst) worst = error, worst_x = xf;
    EXPECT_NEAR(gelu_tanh_of(x), textbook(x), 1e-15 * std::max(1.0, std::fabs(x))) << "fp64 at x = " << x;
    const double h = 1e-6, numeric = (textbook(x + h) - textbook(x - h)) / (2 * h);
    EXPECT_NEAR(gelu_tanh_slope(x), numeric, 1e-8) << "slope at x = " << x;
  }
  EXPECT_LT(worst, 4 * kUlp) << "worst at x = " << worst_x;
  EXPECT_EQ(gelu_tanh_of(-100.0f), 0.0f);
  EXPECT_EQ(gelu_tanh_of(100.0f), 100.0f);
  EXPECT_EQ(gelu_tanh_slope(-100.0f), 0.0f);
  EXPECT_EQ(gelu_tanh_slope(100.0f), 1.0f);
  EXPECT_TRUE(std::isnan(gelu_tanh_of(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace normlab::engine
