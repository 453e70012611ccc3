#pragma once
// C = alpha · op(A) · op(B) + beta · C, row-major, op(X) = X or Xᵀ.
// fp32 goes to oneDNN's sgemm; fp64 (used by the finite-difference tests only) to a plain loop.
// Called inside an OpenMP parallel region, oneDNN runs single-threaded, so per-head GEMMs nest safely.
#include <cstdint>

namespace normlab::engine {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace normlab::engine
