// The bf16 GEMM (engine/gemm.h): operands rounded to bfloat16, products summed in fp32. Checked against the
// fp32 GEMM on operands that bf16 holds exactly (then the two agree to fp32 summation order), against the
// rounding itself, and on random operands within bf16's error bound, for every transpose, alpha and beta.
#include <gtest/gtest.h>
#include <omp.h>

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
  EXPECT_EQ(round_to_bf16(1e-39f), 0.0f);  // a subnormal fp32 becomes zero, as the hardware conversion makes it
  EXPECT_TRUE(std::signbit(round_to_bf16(-1e-39f)));
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

// The shapes that take each of the bf16 GEMM's paths (gemm.cpp) on 2 threads: below 2^20 products, sgemm on the
// rounded operands; above, oneDNN's bf16 matmul, over row blocks of A, or, for A transposed with a long k, over
// shares of k whose partial products are added; and with both transposed, the matmul alone.
struct Shape {
  int64_t m, n, k;
};
constexpr Shape kShapes[] = {{37, 29, 70}, {300, 65, 130}, {37, 29, 1030}};

// Runs the test body with 2 OpenMP threads (the split paths need more than one), then restores the count.
class Bf16GemmPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 hardware (the trainer runs fp32 there)";
    threads_ = omp_get_max_threads();
    omp_set_num_threads(2);
  }
  void TearDown() override { omp_set_num_threads(threads_); }
  int threads_ = 1;
};

TEST_F(Bf16GemmPaths, EqualsFp32OnOperandsThatBf16HoldsExactly) {
  Rng rng(5);
  for (const auto [m, n, k] : kShapes) {
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    // Small integers times a power of two: 8 significant bits at most, and every partial sum is exact in fp32.
    for (float& x : a) x = static_cast<float>(static_cast<int>(rng.uniform() * 33) - 16) / 8;
    for (float& x : b) x = static_cast<float>(static_cast<int>(rng.uniform() * 33) - 16) / 4;
    for (const Case& c :
         {Case{false, false, 1, 0}, Case{true, false, 1, 1}, Case{false, true, 0.5f, 0}, Case{true, true, 2, 0.75f}}) {
      const auto exact = product(c, GemmPrecision::fp32, a, b, m, n, k);
      const auto bf16 = product(c, GemmPrecision::bf16, a, b, m, n, k);
      for (size_t i = 0; i < exact.size(); ++i)
        ASSERT_EQ(bf16[i], exact[i]) << m << "x" << n << "x" << k << " ta " << c.ta << " tb " << c.tb << " at " << i;
    }
  }
}

TEST_F(Bf16GemmPaths, RandomOperandsWithinTheRoundingBound) {
  Rng rng(9);
  for (const auto [m, n, k] : kShapes) {
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (float& x : a) x = static_cast<float>(rng.normal());
    for (float& x : b) x = static_cast<float>(rng.normal());
    for (const Case& c : {Case{false, false, 1, 0}, Case{true, false, 0.5f, 1}, Case{true, true, 1, 1}}) {
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
      // Sums of k unit-variance products: |C| ~ √k (11 at k 130); fp32 reordering ~1e-5 there, bf16's 2^-9
      // relative error per operand ~ 2·2^-9·√k ≈ 0.045 typical at k 130, both growing as √k.
      const double growth = std::sqrt(static_cast<double>(k) / 130);
      SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " ta " << c.ta << " tb " << c.tb);
      EXPECT_LT(worst_vs_rounded, 1e-4 * growth);
      EXPECT_LT(worst_vs_exact, 0.3 * growth);
      EXPECT_GT(worst_vs_exact, 1e-3);  // it did round: a bf16 GEMM that silently ran fp32 fails here
    }
  }
}

// The vectorized conversion (avx512_bf16's VCVTNEPS2BF16) and the scalar one give the same values: A times the
// identity returns A's rounded entries exactly, on both the sgemm path (64 rows) and the matmul path (256 rows),
// for ties, values just beside them, subnormals (flushed to zero), the largest finite bf16 and rows that end in a
// scalar tail (k 70 = 4 · 16 + 6).
TEST_F(Bf16GemmPaths, ConvertsEveryValueAsTheScalarRounding) {
  const int64_t k = 70;
  std::vector<float> identity(static_cast<size_t>(k * k), 0.0f);
  for (int64_t i = 0; i < k; ++i) identity[static_cast<size_t>(i * k + i)] = 1.0f;
  const float specials[] = {1.0f + 1.0f / 256,
                            1.0f + 3.0f / 256,
                            1.0f + 1.0f / 256 + 1e-6f,
                            -(1.0f + 1.0f / 256),
                            1e-39f,
                            -1e-40f,
                            std::numeric_limits<float>::min(),
                            3.38e38f,
                            -0.0f,
                            0.1f};
  Rng rng(3);
  for (const int64_t m : {64, 256}) {
    std::vector<float> a(static_cast<size_t>(m * k));
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = i % 5 == 0 ? specials[i / 5 % std::size(specials)] : static_cast<float>(rng.normal() * 1e3);
    std::vector<float> c(static_cast<size_t>(m * k));
    ScopedGemmPrecision scope(GemmPrecision::bf16);
    gemm(false, false, m, k, k, 1.0f, a.data(), k, identity.data(), k, 0.0f, c.data(), k);
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(c[i], round_to_bf16(a[i])) << "m " << m << " at " << i << ": " << a[i];
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

// The fp64 GEMM (finite-difference checks, train.precision = fp64): the textbook sum Σ_p A[i, p]·B[p, j] for every
// transpose, alpha and beta, with row strides wider than the rows (C's padding left alone), row counts that are not
// multiples of its four-row blocks, k = 0, and a product large enough to run on several threads.
TEST(Fp64Gemm, IsTheTextbookSumForEveryTransposeAndStride) {
  Rng rng(11);
  struct Size {
    int64_t m, n, k;
  };
  for (const Size& s : {Size{1, 1, 1}, Size{7, 5, 9}, Size{13, 33, 0}, Size{67, 65, 70}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const double beta : {0.0, 1.0, -0.5}) {
          const int64_t lda = (ta ? s.m : s.k) + 2, ldb = (tb ? s.k : s.n) + 3, ldc = s.n + 1;
          std::vector<double> a(static_cast<size_t>((ta ? s.k : s.m) * lda)),
              b(static_cast<size_t>((tb ? s.n : s.k) * ldb)), c(static_cast<size_t>(s.m * ldc));
          for (double& x : a) x = rng.normal();
          for (double& x : b) x = rng.normal();
          for (double& x : c) x = rng.normal();
          std::vector<double> out = c;
          gemm(ta, tb, s.m, s.n, s.k, 0.75, a.data(), lda, b.data(), ldb, beta, out.data(), ldc);
          for (int64_t i = 0; i < s.m; ++i) {
            for (int64_t j = 0; j < s.n; ++j) {
              long double sum = 0, size = 0;
              for (int64_t p = 0; p < s.k; ++p) {
                const long double term = static_cast<long double>(ta ? a[p * lda + i] : a[i * lda + p]) *
                                         (tb ? b[j * ldb + p] : b[p * ldb + j]);
                sum += term;
                size += std::abs(term);
              }
              const double want = static_cast<double>(0.75L * sum + beta * static_cast<long double>(c[i * ldc + j]));
              EXPECT_NEAR(out[i * ldc + j], want, 1e-15 * static_cast<double>(size + 2 + s.k))
                  << s.m << "x" << s.n << "x" << s.k << " ta " << ta << " tb " << tb << " beta " << beta;
            }
            EXPECT_EQ(out[i * ldc + s.n], c[i * ldc + s.n]) << "the padding after row " << i << " was written";
          }
        }
}

}  // namespace
}  // namespace normlab::engine
