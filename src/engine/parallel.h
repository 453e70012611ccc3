#pragma once
// Threading helpers shared by the CPU kernels. Reductions are deterministic for any thread count:
// rows are cut into a fixed number of chunks (not one per thread), each chunk is summed into its own
// slice of the workspace, and the slices are added in chunk order.
#include <omp.h>
#include <strings.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace normlab::engine {

// The OpenMP thread count for every kernel from now on (train.threads); 0 leaves OpenMP's default.
inline void set_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

// Below this many elements a kernel's loop runs on the calling thread alone, where waking the other threads costs
// more than it saves. That cost is libgomp's wait policy: with OMP_WAIT_POLICY=PASSIVE idle threads sleep, and each
// region wakes them (tens of µs): at the study size a step enters 568 regions (counted with a perf uprobe on
// libgomp's GOMP_parallel), most over [1024, 64] activations, a few µs of work each, and running loops under 2^17
// elements alone took its step from 49.1 to 45.6 ms (2 threads, medians of 20 steps, 3 alternated rounds); with the
// default policy idle threads spin and a region is cheap: the same threshold cost 37.3 → 39.2 ms, so there it is 2^13.
// Results do not depend on it (the reductions below cut rows into fixed chunks whatever runs them).
inline int64_t parallel_min_elements() {
  static const int64_t elements = [] {
    const char* policy = std::getenv("OMP_WAIT_POLICY");  // libgomp reads it in any case
    return policy && strcasecmp(policy, "passive") == 0 ? int64_t{1} << 17 : int64_t{1} << 13;
  }();
  return elements;
}
inline bool parallel_pays(int64_t elements) { return elements >= parallel_min_elements(); }

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
#pragma omp parallel for schedule(static) if (parallel_pays(rows * span))
  for (int64_t c = 0; c < chunks; ++c) {
    T* acc = partial + c * span;
    std::fill(acc, acc + span, T(0));
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    for (int64_t r = r0; r < r1; ++r) per_row(r, acc);
  }
#pragma omp parallel for schedule(static) if (parallel_pays(chunks * span))
  for (int64_t j = 0; j < span; ++j) {
    T s = 0;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * span + j];
    out[j] += s;
  }
}

}  // namespace normlab::engine
