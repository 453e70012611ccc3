// The bf16 GEMM (engine/gemm.h): operands rounded to bfloat16, products summed in fp32. Checked against the
// fp32 GEMM on operands that bf16 holds exactly (then the two agree to fp32 summation order), against the
// rounding itself, and on random operands within bf16's error bound, for every transpose, alpha and beta.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/rng.h"
#include "engine/gemm.h"

namespace normlab::engine {
namespace {

TEST(Bf16Gemm, RoundsToNearestEven) {
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + 1.0f / 256), 1.0f);                       // a tie: to even (1.0)
  EXPECT_EQ(round_to_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);          // a tie: to even (1 + 4/256)
  EXPECT_EQ(round_to_bf16(1.0f + 1.0f / 256 + 1e-6f), 1.0f + 2.0f / 256);  // above the tie: up
  EXPECT_EQ(round_to_bf16(-3.0f), -3.0f);
  EXPECT_TRUE(std::isinf(round_to_bf16(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
}

struct Case {
  bool ta, tb;
  float alpha, beta;
};

// C = alpha·op(A)·op(B) + beta·C with m, n, k not multiples of any vector width, in both precisions.
std::vector<float> product(const Case& c, GemmPrecision p, const std::vector<float>& a, const std::vector<float>& b,
                           int64_t m, int64_t n, int64_t k) {
  std::vector<float> out(static_cast<size_t>(m * (n + 3)));
  for (size_t i = 0; i < out.size(); ++i) out[i] = 0.25f * static_cast<float>(i % 7);  // beta reads these
  ScopedGemmPrecision scope(p);
  gemm(c.ta, c.tb, m, n, k, c.alpha, a.data(), c.ta ? m : k, b.data(), c.tb ? k : n, c.beta, out.data(), n + 3);
  return out;
}

TEST(Bf16Gemm, EqualsFp32OnOperandsThatBf16HoldsExactly) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 hardware (the trainer runs fp32 there)";
  const int64_t m = 37, n = 29, k = 70;
  Rng rng(5);
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  // Small integers times a power of two: 8 significant bits at most, and every partial sum is exact in fp32.
  for (float& x : a) x = static_cast<float>(static_cast<int>(rng.uniform() * 33) - 16) / 8;
  for (float& x : b) x = static_cast<float>(static_cast<int>(rng.uniform() * 33) - 16) / 4;
  for (const Case& c :
       {Case{false, false, 1, 0}, Case{true, false, 1, 1}, Case{false, true, 0.5f, 0}, Case{true, true, 2, 0.75f}}) {
    const auto exact = product(c, GemmPrecision::fp32, a, b, m, n, k);
    const auto bf16 = product(c, GemmPrecision::bf16, a, b, m, n, k);
    for (size_t i = 0; i < exact.size(); ++i)
      ASSERT_EQ(bf16[i], exact[i]) << "ta " << c.ta << " tb " << c.tb << " at " << i;
  }
}

TEST(Bf16Gemm, RandomOperandsWithinTheRoundingBound) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 hardware (the trainer runs fp32 there)";
  const int64_t m = 33, n = 65, k = 130;
  Rng rng(9);
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  for (float& x : a) x = static_cast<float>(rng.normal());
  for (float& x : b) x = static_cast<float>(rng.normal());
  for (const Case& c : {Case{false, false, 1, 0}, Case{true, true, 1, 1}}) {
    // The product of the rounded operands, computed in fp32: what bf16 must reproduce to summation order.
    std::vector<float> ar(a.size()), br(b.size());
    for (size_t i = 0; i < a.size(); ++i) ar[i] = round_to_bf16(a[i]);
    for (size_t i = 0; i < b.size(); ++i) br[i] = round_to_bf16(b[i]);
    const auto rounded = product(c, GemmPrecision::fp32, ar, br, m, n, k);
    const auto exact = product(c, GemmPrecision::fp32, a, b, m, n, k);
    const auto bf16 = product(c, GemmPrecision::bf16, a, b, m, n, k);
    double worst_vs_rounded = 0, worst_vs_exact = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      worst_vs_rounded = std::max(worst_vs_rounded, std::abs(double(bf16[i]) - rounded[i]));
      worst_vs_exact = std::max(worst_vs_exact, std::abs(double(bf16[i]) - exact[i]));
    }
    // Sums of 130 unit-variance products: |C| ~ 11; fp32 reordering ~1e-5, bf16's 2^-9 relative error per operand
    // ~ 2·2^-9·√130 ≈ 0.045 typical.
    EXPECT_LT(worst_vs_rounded, 1e-4);
    EXPECT_LT(worst_vs_exact, 0.3);
    EXPECT_GT(worst_vs_exact, 1e-3);  // it did round: a bf16 GEMM that silently ran fp32 fails here
  }
}

TEST(Bf16Gemm, UsesOneDnnsBf16Kernels) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 hardware (the trainer runs fp32 there)";
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {  // transposed operands are read through strides: the fast kernels must take them
      const std::string impl = bf16_gemm_implementation(ta, tb, 128, 256, 64);
      EXPECT_EQ(impl.find("ref"), std::string::npos) << "oneDNN chose its reference matmul: " << impl;
    }
}

}  // namespace
}  // namespace normlab::engine
