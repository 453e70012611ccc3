#pragma once
// C = alpha · op(A) · op(B) + beta · C, row-major, op(X) = X or Xᵀ.
// fp32 goes to oneDNN's sgemm, or, at GemmPrecision::bf16, to oneDNN's matmul with bf16 inputs and fp32
// accumulation and output; fp64 (the finite-difference tests, train.precision = fp64) to a loop of our own.
// Called inside an OpenMP parallel region, oneDNN runs single-threaded, so per-head GEMMs nest safely.
#include <cstdint>
#include <string>

namespace normlab::engine {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// How the fp32 GEMMs multiply, for the whole process (train.precision; set once before training):
//   fp32: fp32 products and sums (sgemm).
//   bf16: each operand rounded to bfloat16 (8 significant bits, round to nearest even), the products
//         summed in fp32 and written as fp32: the mixed precision of bf16 autocast. Everything that is not a
//         GEMM (norm statistics, softmax, cross-entropy, the optimizer and its fp32 master weights) stays fp32.
enum class GemmPrecision { fp32, bf16 };
void set_gemm_precision(GemmPrecision p);
GemmPrecision gemm_precision();
// Sets the precision for its lifetime and then restores the one before (a run, a test).
class ScopedGemmPrecision {
 public:
  explicit ScopedGemmPrecision(GemmPrecision p) : previous_(gemm_precision()) { set_gemm_precision(p); }
  ~ScopedGemmPrecision() { set_gemm_precision(previous_); }
  ScopedGemmPrecision(const ScopedGemmPrecision&) = delete;
  ScopedGemmPrecision& operator=(const ScopedGemmPrecision&) = delete;

 private:
  GemmPrecision previous_;
};
// Whether this CPU multiplies bf16 in hardware (avx512_bf16 or AMX); without it oneDNN would emulate bf16
// more slowly than fp32, so the trainer runs fp32 and says so.
bool cpu_has_bf16();
// The oneDNN implementation a bf16 GEMM of this shape runs (e.g. "brg:avx512_core_bf16"), for tests and logs.
std::string bf16_gemm_implementation(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);
// x rounded to the nearest bfloat16 (ties to even), returned as a float: what a bf16 GEMM multiplies.
float round_to_bf16(float x);

}  // namespace normlab::engine
