#pragma once
// Threading helpers shared by the CPU kernels. Reductions are deterministic for any thread count:
// rows are cut into a fixed number of chunks (not one per thread), each chunk is summed into its own
// slice of the workspace, and the slices are added in chunk order.
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace normlab::engine {

// The OpenMP thread count for every kernel from now on (train.threads); 0 leaves OpenMP's default.
inline void set_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

inline constexpr int64_t kReduceChunks = 32;

// Workspace bytes reduce_rows needs for `accumulators` vectors of `width` elements of T.
template <typename T>
size_t reduce_rows_workspace(int64_t width, int accumulators) {
  return static_cast<size_t>(kReduceChunks * width * accumulators) * sizeof(T);
}

// For each row r, per_row(r, acc) adds its contribution into acc[0..accumulators*width).
// The chunk sums are then ADDED into out (out += Σ chunks), matching the backward convention.
template <typename T, typename PerRow>
void reduce_rows(int64_t rows, int64_t width, int accumulators, T* out, std::byte* workspace, PerRow per_row) {
  T* partial = reinterpret_cast<T*>(workspace);
  const int64_t span = width * accumulators;
  const int64_t chunks = std::min<int64_t>(kReduceChunks, std::max<int64_t>(rows, 1));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    T* acc = partial + c * span;
    std::fill(acc, acc + span, T(0));
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    for (int64_t r = r0; r < r1; ++r) per_row(r, acc);
  }
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < span; ++j) {
    T s = 0;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * span + j];
    out[j] += s;
  }
}

}  // namespace normlab::engine
