#include "engine/gemm.h"

#include <immintrin.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.h"

namespace normlab::engine {

namespace {

std::atomic<GemmPrecision> precision{GemmPrecision::fp32};

// bfloat16 is the top half of an fp32: keep the sign, the 8 exponent bits and 7 mantissa bits, rounding the
// dropped 16 bits to nearest, ties to even (adding 0x7FFF plus the kept lowest bit carries exactly then).
// NaN stays a (quiet) NaN instead of rounding into infinity; a subnormal fp32 (|x| < 2^-126) becomes a zero of its
// sign, as the hardware conversion (VCVTNEPS2BF16) does, so that both paths give the same bits.
inline uint16_t bf16_bits(float x) {
  const auto bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7F800000u) == 0) return static_cast<uint16_t>(bits >> 16 & 0x8000u);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) return static_cast<uint16_t>(bits >> 16 | 0x40);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// What a row of floats becomes: bf16 bits for oneDNN's bf16 matmul, or the rounded values as floats for sgemm.
inline void put(uint16_t* out, uint16_t bits) { *out = bits; }
inline void put(float* out, uint16_t bits) { *out = std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// n floats rounded to bf16 with avx512_bf16's conversion, 16 at a time: the scalar loop does not vectorize (its
// branches), and converting the operands took as long as the multiply in small GEMMs (a 64 × 64 · 64 × 1024 weight
// gradient: 92 µs in bf16 against 37 µs in fp32). Only called where the CPU has the instruction.
template <typename Out>
__attribute__((target("avx512f,avx512bf16"))) void round_row_avx512(const float* x, int64_t n, Out* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    const __m256i bits = reinterpret_cast<const __m256i&>(h);
    if constexpr (std::is_same_v<Out, uint16_t>) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bits);
    } else {
      // The zero-masking forms: GCC 12 warns that the plain ones' undefined pass-through may be uninitialized.
      _mm512_storeu_si512(out + i, _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, bits), 16));
    }
  }
  for (; i < n; ++i) put(out + i, bf16_bits(x[i]));
}

const bool has_avx512_bf16 = __builtin_cpu_supports("avx512bf16");

// Rows [first, last) of X (cols wide as stored, row stride ld) rounded to bf16 into the same rows of a contiguous
// buffer in the same layout; a transposed operand stays transposed and oneDNN or sgemm reads it through its strides.
template <typename Out>
void round_rows(int64_t first, int64_t last, int64_t cols, const float* x, int64_t ld, Out* out) {
  for (int64_t r = first; r < last; ++r) {
    if (has_avx512_bf16) {
      round_row_avx512(x + r * ld, cols, out + r * cols);
    } else {
      for (int64_t c = 0; c < cols; ++c) put(out + r * cols + c, bf16_bits(x[r * ld + c]));
    }
  }
}

// The stored shapes of A and B (a transposed operand is stored [k, m] or [n, k]), and the calling thread's buffers
// for their rounded copies, sized for them: they grow once to the largest operands, then are reused.
struct Operands {
  int64_t a_rows, a_cols, b_rows, b_cols;
};
Operands stored_operands(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  return {trans_a ? k : m, trans_a ? m : k, trans_b ? n : k, trans_b ? k : n};
}
template <typename Out>
std::pair<Out*, Out*> operand_buffers(const Operands& o) {
  thread_local std::vector<Out> a, b;
  a.resize(static_cast<size_t>(o.a_rows * o.a_cols));
  b.resize(static_cast<size_t>(o.b_rows * o.b_cols));
  return {a.data(), b.data()};
}
// Both operands whole, rounded into contiguous copies in their stored layouts.
template <typename Out>
std::pair<Out*, Out*> round_operands(const Operands& o, const float* a, int64_t lda, const float* b, int64_t ldb) {
  const auto [a_out, b_out] = operand_buffers<Out>(o);
  round_rows(0, o.a_rows, o.a_cols, a, lda, a_out);
  round_rows(0, o.b_rows, o.b_cols, b, ldb, b_out);
  return {a_out, b_out};
}

const dnnl::engine& cpu() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One matmul primitive per shape: op(A) [m, k] bf16 · op(B) [k, n] bf16 → C [m, n] fp32 (row stride ldc), scaled by
// alpha, plus beta · C when accumulating; a transposed operand is described by its strides (oneDNN's "ba" layout).
// Per thread, so the per-head GEMMs inside a parallel region never share one.
struct Bf16Matmul {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
  std::string implementation;
};
using Shape = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, float, float>;  // ta, tb, m, n, k, ldc, α, β

Bf16Matmul make_matmul(const Shape& s) {
  const auto [trans_a, trans_b, m, n, k, ldc, alpha, beta] = s;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc a_md({m, k}, dt::bf16, trans_a ? dnnl::memory::dims{1, m} : dnnl::memory::dims{k, 1});
  const dnnl::memory::desc b_md({k, n}, dt::bf16, trans_b ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1});
  const dnnl::memory::desc c_md({m, n}, dt::f32, dnnl::memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);
    attr.set_post_ops(sum);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, cpu());
  return {dnnl::matmul(pd), dnnl::memory(a_md, cpu(), DNNL_MEMORY_NONE), dnnl::memory(b_md, cpu(), DNNL_MEMORY_NONE),
          dnnl::memory(c_md, cpu(), DNNL_MEMORY_NONE), pd.impl_info_str()};
}

Bf16Matmul& matmul_for(const Shape& s) {
  thread_local std::map<Shape, Bf16Matmul> cache;  // a model has a few dozen GEMM shapes
  auto it = cache.find(s);
  if (it == cache.end()) it = cache.emplace(s, make_matmul(s)).first;
  return it->second;
}

// How many row blocks a GEMM is split into here, one per thread (1: oneDNN threads it itself). oneDNN's sgemm
// threads some of a linear layer's shapes poorly: x·Wᵀ at 2048 × 768 × 256 (a QKV projection) ran 0.93× as fast on
// 2 threads as on 1, 2048 × 256 × 1024 1.42×, while one single-threaded sgemm per half of the rows ran 1.94× and
// 1.97× (AMD EPYC, 2 threads). The rows of op(A) are split when A is not transposed (a row block is then contiguous;
// for transposed A, the weight gradients, oneDNN's own split was as good) and each block has at least 64 rows; only
// outside a parallel region and with nested regions off (Graph::plan), so that the GEMM inside each block runs on
// its own thread. A bf16 GEMM's blocks also convert their own rows of A and a share of B's in parallel. Whole
// steps at 2 threads, alternating with and without the split, 3 rounds: the small model 471 → 457 ms (fp32) and
// 419 → 387 ms (bf16), the study size 54.6 → 51.3 ms (fp32) and 62.5 → 60.1 ms (bf16), medians.
int row_blocks(bool trans_a, int64_t m) {
  if (trans_a || omp_in_parallel() || omp_get_max_active_levels() > 1) return 1;
  return static_cast<int>(std::clamp<int64_t>(m / 64, 1, omp_get_max_threads()));
}

// How many shares of k a bf16 weight gradient (A transposed, B not) is split into, one per thread (see gemm_bf16):
// at least 256 of k per share, and only outside a parallel region.
int k_blocks(bool trans_b, int64_t k) {
  if (trans_b || omp_in_parallel() || omp_get_max_active_levels() > 1) return 1;
  return static_cast<int>(std::clamp<int64_t>(k / 256, 1, omp_get_max_threads()));
}

// Rows [first, last) of block t of `blocks`: boundaries on multiples of 16 rows, so that each block's full vector
// tiles are those of a whole run.
std::pair<int64_t, int64_t> row_block(int64_t m, int blocks, int t) {
  return {m * t / blocks / 16 * 16, t + 1 == blocks ? m : m * (t + 1) / blocks / 16 * 16};
}

dnnl_status_t sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  return dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_fp32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int blocks = row_blocks(trans_a, m);
  int status = dnnl_success;  // the first failing block's (a throw cannot leave the parallel region)
  if (blocks == 1) {
    status = sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
#pragma omp parallel num_threads(blocks) reduction(max : status)
    {
      const auto [first, last] = row_block(m, blocks, omp_get_thread_num());
      status =
          sgemm(false, trans_b, last - first, n, k, alpha, a + first * lda, lda, b, ldb, beta, c + first * ldc, ldc);
    }
  }
  if (status != dnnl_success) fail("internal: oneDNN sgemm failed (status {}) for m={} n={} k={}", status, m, n, k);
}

// Whether oneDNN's bf16 matmul beats sgemm on this shape: not on the smallest, where the primitive's fixed cost of
// a few µs is most of the time. There a bf16 GEMM runs sgemm on the operands rounded to bf16: the same products
// (a product of two bf16 values is exact in fp32) summed in fp32, in another order, so the precision's meaning
// holds either way. Measured on an AMD EPYC with avx512_bf16 (no AMX), 2 threads, µs as fp32 sgemm / bf16 matmul:
// the attention's per-head 64 × 64 × 16 1.3 / 7.1 (rounded and through sgemm: 1.5); 1024 × 64 × 64 26 / 20 and
// 1024 × 4096 × 64 1466 / 835; the weight gradients, with k split over the threads, 64 × 64 × 1024 30 / 26 and
// 4096 × 64 × 1024 2040 / 1174.
bool bf16_matmul_pays(int64_t m, int64_t n, int64_t k) {
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= 0x1p20;
}

// op(A) · op(B) on the operands rounded to bf16, through sgemm (see bf16_matmul_pays).
void gemm_bf16_rounded(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const Operands o = stored_operands(trans_a, trans_b, m, n, k);
  const auto [a_rounded, b_rounded] = round_operands<float>(o, a, lda, b, ldb);
  gemm_fp32(trans_a, trans_b, m, n, k, alpha, a_rounded, o.a_cols, b_rounded, o.b_cols, beta, c, ldc);
}

void run_matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a16,
                const uint16_t* b16, float beta, float* c, int64_t ldc) {
  Bf16Matmul& mm = matmul_for({trans_a, trans_b, m, n, k, ldc, alpha, beta});
  mm.a.set_data_handle(const_cast<uint16_t*>(a16));
  mm.b.set_data_handle(const_cast<uint16_t*>(b16));
  mm.c.set_data_handle(c);
  thread_local dnnl::stream stream(cpu());
  mm.primitive.execute(stream, {{DNNL_ARG_SRC, mm.a}, {DNNL_ARG_WEIGHTS, mm.b}, {DNNL_ARG_DST, mm.c}});
  stream.wait();
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (!bf16_matmul_pays(m, n, k))
    return gemm_bf16_rounded(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const Operands o = stored_operands(trans_a, trans_b, m, n, k);
  const int blocks = trans_a ? k_blocks(trans_b, k) : row_blocks(false, m);
  if (blocks == 1) {
    const auto [a16, b16] = round_operands<uint16_t>(o, a, lda, b, ldb);
    return run_matmul(trans_a, trans_b, m, n, k, alpha, a16, b16, beta, c, ldc);
  }
  // Plain pointers, not a structured binding: clang 14 cannot refer to one inside an OpenMP region.
  const std::pair<uint16_t*, uint16_t*> buffers = operand_buffers<uint16_t>(o);
  uint16_t *a_out = buffers.first, *b_out = buffers.second;
  bool failed = false;  // a throw cannot leave the parallel region
  if (trans_a) {
    // A transposed is a weight gradient, ∂W = ∂yᵀ·x: k (the batch's tokens) is long and m × n small, and the matmul
    // does not split k over threads. Each thread takes a share of k instead: it converts its own rows of both
    // operands (A and B are stored [k, m] and [k, n]), multiplies them into its own partial C (the first thread into
    // C itself, with beta), and the partials are then added into C, each thread a share of C's rows.
    thread_local std::vector<float> partials;
    partials.resize(static_cast<size_t>((blocks - 1) * m * n));
    float* partial = partials.data();
#pragma omp parallel num_threads(blocks) reduction(|| : failed)
    {
      const int t = omp_get_thread_num();
      const auto [first, last] = row_block(k, blocks, t);
      round_rows(first, last, m, a, lda, a_out);
      round_rows(first, last, n, b, ldb, b_out);
      try {
        if (t == 0) run_matmul(true, false, m, n, last - first, alpha, a_out, b_out, beta, c, ldc);
        else
          run_matmul(true, false, m, n, last - first, alpha, a_out + first * m, b_out + first * n, 0.0f,
                     partial + (t - 1) * m * n, n);
      } catch (const std::exception&) {
        failed = true;
      }
#pragma omp barrier
      for (int64_t i = m * t / blocks; i < m * (t + 1) / blocks; ++i)
        for (int u = 1; u < blocks; ++u)
          for (int64_t j = 0; j < n; ++j) c[i * ldc + j] += partial[((u - 1) * m + i) * n + j];
    }
    if (failed) fail("internal: a oneDNN bf16 matmul failed for m={} n={} k={}", m, n, k);
    return;
  }
#pragma omp parallel num_threads(blocks) reduction(|| : failed)
  {
    const int t = omp_get_thread_num();
    const auto [first, last] = row_block(m, blocks, t);
    round_rows(first, last, k, a, lda, a_out);
    round_rows(o.b_rows * t / blocks, o.b_rows * (t + 1) / blocks, o.b_cols, b, ldb, b_out);
#pragma omp barrier
    try {
      run_matmul(false, trans_b, last - first, n, k, alpha, a_out + first * k, b_out, beta, c + first * ldc, ldc);
    } catch (const std::exception&) {
      failed = true;
    }
  }
  if (failed) fail("internal: a oneDNN bf16 matmul failed for m={} n={} k={}", m, n, k);
}

}  // namespace

void set_gemm_precision(GemmPrecision p) { precision.store(p); }
GemmPrecision gemm_precision() { return precision.load(); }

bool cpu_has_bf16() {
  // oneDNN's own dispatch: the ISA it would use for bf16 on this CPU (avx512_core_bf16 or an AMX level).
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

std::string bf16_gemm_implementation(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  return matmul_for({trans_a, trans_b, m, n, k, n, 1.0f, 0.0f}).implementation;
}

float round_to_bf16(float x) { return std::bit_cast<float>(static_cast<uint32_t>(bf16_bits(x)) << 16); }

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (precision.load(std::memory_order_relaxed) == GemmPrecision::bf16 && k > 0) {
    gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  gemm_fp32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// fp64: the finite-difference checks and train.precision = fp64. Each C[i, j] is Σ_p A[i, p]·B[p, j] summed in order
// p = 0, 1, ..., k − 1, as the textbook loop does; the loops are ordered so that the innermost runs along a row of B
// (transposed B is first copied into that layout) and four rows of A share each row of B read, which vectorizes and
// keeps B's rows in cache: the same sums, an order of magnitude faster than the (i, j, p) loop.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  thread_local std::vector<double> b_rows;  // B as [k, n] when it is stored transposed
  if (trans_b) {
    b_rows.resize(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) b_rows[static_cast<size_t>(p * n + j)] = b[j * ldb + p];
  }
  const double* b_row0 = trans_b ? b_rows.data() : b;
  const int64_t b_stride = trans_b ? n : ldb;
  constexpr int64_t kRows = 4;
  const int64_t blocks = (m + kRows - 1) / kRows;
  const bool parallel =
      !omp_in_parallel() && static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= 0x1p18;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t i0 = block * kRows, rows = std::min(kRows, m - i0);
    thread_local std::vector<double> sums;
    sums.assign(static_cast<size_t>(kRows * n), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double* b_p = b_row0 + p * b_stride;
      for (int64_t r = 0; r < rows; ++r) {
        const double a_ip = trans_a ? a[p * lda + i0 + r] : a[(i0 + r) * lda + p];
        double* s = sums.data() + r * n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) s[j] += a_ip * b_p[j];
      }
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double& out = c[(i0 + r) * ldc + j];
        out = alpha * sums[static_cast<size_t>(r * n + j)] + (beta == 0 ? 0 : beta * out);
      }
  }
}

}  // namespace normlab::engine
