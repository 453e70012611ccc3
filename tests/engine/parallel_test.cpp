// engine/parallel.h: a reduction gives the same bits on any number of threads, whether its loops run on the
// calling thread alone (below parallel_min_elements) or on all of them.
#include "engine/parallel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstddef>
#include <vector>

#include "common/rng.h"

namespace normlab::engine {
namespace {

// Σ_rows x and Σ_rows x² of a [rows, width] matrix through reduce_rows, on `threads` threads.
std::vector<float> column_sums(const std::vector<float>& x, int64_t rows, int64_t width, int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::vector<float> out(static_cast<size_t>(2 * width), 0.5f);  // reduce_rows adds into out
  std::vector<std::byte> workspace(reduce_rows_workspace<float>(width, 2));
  reduce_rows<float>(rows, width, 2, out.data(), workspace.data(), [&](int64_t r, float* acc) {
    for (int64_t j = 0; j < width; ++j) {
      const float v = x[static_cast<size_t>(r * width + j)];
      acc[j] += v;
      acc[width + j] += v * v;
    }
  });
  omp_set_num_threads(saved);
  return out;
}

TEST(Parallel, ReductionsGiveTheSameBitsOnAnyThreadCountAboveAndBelowTheThreshold) {
  Rng rng(4);
  const int64_t width = 64;
  // Below the threshold (run alone), just above it, and well above it (run on every thread).
  for (const int64_t elements : {parallel_min_elements() / 2, parallel_min_elements(), 8 * parallel_min_elements()}) {
    const int64_t rows = elements / width;
    std::vector<float> x(static_cast<size_t>(rows * width));
    for (float& v : x) v = static_cast<float>(rng.normal());
    const std::vector<float> one = column_sums(x, rows, width, 1);
    for (const int threads : {2, 3}) {
      const std::vector<float> many = column_sums(x, rows, width, threads);
      for (size_t i = 0; i < one.size(); ++i)
        ASSERT_EQ(many[i], one[i]) << rows << " rows, " << threads << " threads, at " << i;
    }
  }
  EXPECT_TRUE(parallel_pays(parallel_min_elements()));
  EXPECT_FALSE(parallel_pays(parallel_min_elements() - 1));
}

}  // namespace
}  // namespace normlab::engine
