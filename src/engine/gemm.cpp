#include "engine/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <bit>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "common/error.h"

namespace normlab::engine {

namespace {

std::atomic<GemmPrecision> precision{GemmPrecision::fp32};

// bfloat16 is the top half of an fp32: keep the sign, the 8 exponent bits and 7 mantissa bits, rounding the
// dropped 16 bits to nearest, ties to even (adding 0x7FFF plus the kept lowest bit carries exactly then).
// NaN stays a (quiet) NaN instead of rounding into infinity.
inline uint16_t bf16_bits(float x) {
  const auto bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) return static_cast<uint16_t>(bits >> 16 | 0x40);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// X (rows × cols as stored, row stride ld) into a contiguous bf16 buffer in the same layout; a transposed operand
// stays transposed and oneDNN reads it through its strides.
void to_bf16(int64_t rows, int64_t cols, const float* x, int64_t ld, std::vector<uint16_t>& out) {
  out.resize(static_cast<size_t>(rows * cols));  // grows once per thread to the largest operand, then reused
  uint16_t* o = out.data();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = bf16_bits(x[r * ld + c]);
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

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  thread_local std::vector<uint16_t> a16, b16;
  to_bf16(trans_a ? k : m, trans_a ? m : k, a, lda, a16);
  to_bf16(trans_b ? n : k, trans_b ? k : n, b, ldb, b16);
  Bf16Matmul& mm = matmul_for({trans_a, trans_b, m, n, k, ldc, alpha, beta});
  mm.a.set_data_handle(a16.data());
  mm.b.set_data_handle(b16.data());
  mm.c.set_data_handle(c);
  thread_local dnnl::stream stream(cpu());
  mm.primitive.execute(stream, {{DNNL_ARG_SRC, mm.a}, {DNNL_ARG_WEIGHTS, mm.b}, {DNNL_ARG_DST, mm.c}});
  stream.wait();
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
  dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    fail("internal: oneDNN sgemm failed (status {}) for m={} n={} k={}", int(status), m, n, k);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (trans_a ? a[p * lda + i] : a[i * lda + p]) * (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c[i * ldc + j]);
    }
}

}  // namespace normlab::engine
