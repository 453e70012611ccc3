#pragma once
// exp, tanh and the normal CDF Φ in fp32 as straight-line code that the compiler vectorizes (no libm call, no
// branch), for the loops where a step spends its time in them: softmax (attention, cross-entropy), GELU, SiLU and DyT.
// fp64, the precision of the finite-difference checks, keeps libm's. Measured accuracy:
// tests/engine/fast_math_test.cpp.
//
// exp(x): x = n·ln2 + r with n = round(x/ln2) (rounded by adding and subtracting 1.5·2²³) and |r| ≤ ln2/2, r
//   computed with ln2 split in two parts (Cody & Waite) so it is exact to fp32; e^r = 1 + r + r²·P(r), P Cephes'
//   degree-5 minimax polynomial of expf; 2ⁿ is written into the exponent bits (as 2ⁿ⁻¹·2, so n = 128 fits).
//   NaN stays NaN, x > 88.7 gives +inf, and x < −86.6, where e^x < 2.7e−38 would need a subnormal 2ⁿ, gives 0.
// Φ(x) = erfc(−x/√2)/2, with erfc by the Chebyshev fit of Numerical Recipes (§6.2, "erfcc"; fractional error
//   below 1.2e−7 everywhere in exact arithmetic): for z = |u|, t = 1/(1 + z/2),
//   erfc(z) = t·exp(−z² + c₀ + t·(c₁ + t·(c₂ + … + t·c₉))), and erfc(−z) = 2 − erfc(z). One exp per element.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

namespace normlab::engine {

inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f, kShifter = 12582912.0f;  // 1.5·2²³: adding it rounds to integer
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;        // ln2 = hi + lo, hi exact in 9 bits
  const float xc = x < -86.6f ? -86.6f : (x > 88.7f ? 88.7f : x);         // NaN passes through
  const float shifted = xc * kLog2e + kShifter;
  const float n = shifted - kShifter;
  const auto e = static_cast<uint32_t>(std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kShifter));
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float half_scale = std::bit_cast<float>((e + 126u) << 23);  // 2ⁿ⁻¹, n ∈ [−125, 128]
  const float y = p * half_scale * 2.0f;
  return x < -86.6f ? 0.0f : (x > 88.7f ? std::numeric_limits<float>::infinity() : y);
}
inline double fast_exp(double x) { return std::exp(x); }

// tanh(x) = sign(x)·tanh(a), a = |x|, both halves computed and one kept (a select, which vectorizes):
//   a < 0.55: the Maclaurin series a − a³/3 + 2a⁵/15 − … through a¹⁷ (coefficients 2²ⁿ(2²ⁿ − 1)B₂ₙ/(2n)!), whose
//             next term is below 2e−9 of tanh(a) there;
//   a ≥ 0.55: 1 − 2/(e^(2a) + 1). There 2/(e^(2a) + 1) ≤ 0.5, so the subtraction loses at most one bit; e^(2a)
//             overflowing to +inf gives exactly 1, and NaN stays NaN.
// Within 2.9 × 2⁻²⁴ of tanh relative, the worst just above the switch (FastMath.TanhIsWithinThreeUlpOfLibm).
inline float fast_tanh(float x) {
  const float a = std::fabs(x), a2 = a * a;
  float p = 5.90027440945586e-4f;  // a¹⁷'s coefficient 6404582/10854718875, then Horner in a² down to a
  p = p * a2 - 1.4558343870513183e-3f;
  p = p * a2 + 3.592128036572481e-3f;
  p = p * a2 - 8.863235529902197e-3f;
  p = p * a2 + 2.1869488536155203e-2f;
  p = p * a2 - 5.396825396825397e-2f;
  p = p * a2 + 1.3333333333333333e-1f;
  p = p * a2 - 3.333333333333333e-1f;
  const float series = a + a * a2 * p;
  const float from_exp = 1.0f - 2.0f / (fast_exp(2.0f * a) + 1.0f);
  return std::copysign(a < 0.55f ? series : from_exp, x);
}
inline double fast_tanh(double x) { return std::tanh(x); }

inline float normal_cdf(float x) {
  const float u = x * -0.707106781186547524f;  // Φ(x) = erfc(u)/2, u = −x/√2
  const float z = std::fabs(u);
  const float t = 1.0f / (1.0f + 0.5f * z);
  float c = 0.17087277f;
  c = c * t - 0.82215223f;
  c = c * t + 1.48851587f;
  c = c * t - 1.13520398f;
  c = c * t + 0.27886807f;
  c = c * t - 0.18628806f;
  c = c * t + 0.09678418f;
  c = c * t + 0.37409196f;
  c = c * t + 1.00002368f;
  c = c * t - 1.26551223f;
  const float erfc_z = t * fast_exp(c - z * z);
  return 0.5f * (u >= 0.0f ? erfc_z : 2.0f - erfc_z);
}
inline double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

template <typename T>
T normal_pdf(T x) {
  return fast_exp(T(-0.5) * x * x) * static_cast<T>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
}

// GELU, exact (erf) form as torch's default, and its derivative: y = x·Φ(x), ∂y/∂x = Φ(x) + x·φ(x). One
// definition for the gelu op, GeGLU and the fused linear + GELU, so the fused and unfused paths agree bit for bit.
template <typename T>
T gelu_of(T x) {
  return x * normal_cdf(x);
}
template <typename T>
T gelu_slope(T x) {
  return normal_cdf(x) + x * normal_pdf(x);
}

// GELU's tanh approximation (Hendrycks & Gimpel 2016, §2; GPT-2's gelu_new, torch's approximate='tanh'):
//   y = ½x(1 + tanh u),  u = √(2/π)(x + 0.044715x³).
// Since ½(1 + tanh u) = σ(2u), y = x·σ(2u): one exp, no tanh, and the same form vectorizes in fp32. With
// s = σ(2u) and σ' = σ(1 − σ):
//   ∂y/∂x = s + x·s(1 − s)·2u',  u' = √(2/π)(1 + 3·0.044715x²).
// For x → −∞, e^(−2u) overflows to +inf and s = 0 (y = −0), so no NaN arises.
template <typename T>
T gelu_tanh_sigmoid(T x) {
  constexpr T kSqrt2OverPi = static_cast<T>(0.797884560802865355879892119868763737);  // √(2/π)
  const T u = kSqrt2OverPi * (x + T(0.044715) * x * x * x);
  return T(1) / (T(1) + fast_exp(T(-2) * u));
}
template <typename T>
T gelu_tanh_of(T x) {
  return x * gelu_tanh_sigmoid(x);
}
template <typename T>
T gelu_tanh_slope(T x) {
  constexpr T kSqrt2OverPi = static_cast<T>(0.797884560802865355879892119868763737);
  const T s = gelu_tanh_sigmoid(x);
  return s + x * s * (T(1) - s) * T(2) * kSqrt2OverPi * (T(1) + T(3 * 0.044715) * x * x);
}

}  // namespace normlab::engine
