#include "engine/tensor.h"

#include <fmt/format.h>

#include "engine/parallel.h"

namespace normlab::engine {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

void widen_bf16(const uint16_t* bits, float* out, int64_t n) {
#pragma omp parallel for schedule(static) if (parallel_pays(n))
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(bits[i]);
}

const char* role_name(Role r) {
  switch (r) {
    case Role::none:
      return "none";
    case Role::embedding:
      return "embedding";
    case Role::q:
      return "q";
    case Role::k:
      return "k";
    case Role::v:
      return "v";
    case Role::o:
      return "o";
    case Role::fc1:
      return "fc1";
    case Role::gate:
      return "gate";
    case Role::fc2:
      return "fc2";
    case Role::head:
      return "head";
    case Role::norm_gain:
      return "norm_gain";
    case Role::norm_bias:
      return "norm_bias";
    case Role::bias:
      return "bias";
    case Role::scalar:
      return "scalar";
  }
  return "?";
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += fmt::format("{}{}", i ? "," : "", dims[static_cast<size_t>(i)]);
  return s + "]";
}

}  // namespace normlab::engine
