#pragma once
// Tensor metadata. A tensor is a node in a Graph: its storage is planned by the graph before the
// first step and never reallocated, so a training step touches no heap. dtype and device live in
// the tensor (not in the model): an inference-only graph may store a parameter as bf16 (Graph::store_as_bf16),
// and a CUDA backend can be added later.
#include <array>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace normlab::engine {

// bf16: bfloat16, the upper 16 bits of an fp32 (1 sign, 8 exponent, 7 mantissa bits); only parameter storage.
enum class DType : uint8_t { f32, f64, i32, bf16 };
enum class Device : uint8_t { cpu };

inline size_t dtype_size(DType t) { return t == DType::f64 ? 8 : t == DType::bf16 ? 2 : 4; }
const char* dtype_name(DType t);

// bfloat16 bits → fp32, exactly: a bf16 value is an fp32 whose low 16 bits are zero.
inline float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
void widen_bf16(const uint16_t* bits, float* out, int64_t n);  // n values

// Up to 4 dimensions, row-major, contiguous.
struct Shape {
  std::array<int64_t, 4> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    for (int64_t v : d) dims[static_cast<size_t>(rank++)] = v;
  }
  int64_t operator[](int i) const { return dims[static_cast<size_t>(i < 0 ? rank + i : i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[static_cast<size_t>(i)];
    return n;
  }
  int64_t last() const { return rank ? dims[static_cast<size_t>(rank - 1)] : 1; }
  int64_t rows() const { return numel() / last(); }  // every leading axis folded into one
  bool operator==(const Shape&) const = default;
  std::string str() const;
};

// What a parameter is for. Initialization rules (DeepNorm β, T-Fixup, Sub-LN γ ...) are keyed on it.
enum class Role : uint8_t { none, embedding, q, k, v, o, fc1, gate, fc2, head, norm_gain, norm_bias, bias, scalar };
const char* role_name(Role r);

using TensorId = int32_t;
inline constexpr TensorId kNoTensor = -1;

enum class TensorKind : uint8_t { parameter, input, activation, view };

struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  TensorKind kind = TensorKind::activation;
  Role role = Role::none;
  bool requires_grad = false;
  bool weight_decay = false;     // parameters only: AdamW decays matrices, never norms, biases or scalars
  double init_value = 0;         // parameters only: the constant that gains, biases and scalars start at
  TensorId view_of = kNoTensor;  // views share storage (and gradient storage) with their base
  size_t offset = 0;             // byte offset in its arena, planned by Graph::plan()
  size_t grad_offset = 0;
  void* data = nullptr;
  void* grad = nullptr;
  size_t bytes() const { return static_cast<size_t>(shape.numel()) * dtype_size(dtype); }
};

}  // namespace normlab::engine
