#pragma once
// Reader and writer for the safetensors format (https://huggingface.co/docs/safetensors):
//
//   [u64 little-endian N][N bytes of JSON header, space-padded][data section]
//   header: {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"<key>": "<string value>", ...}}      (offsets relative to the data)
//
// The reader loads the whole file and validates it before handing out any tensor; every problem
// is a normlab::Error naming the file (and tensor) and saying what to do.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace normlab::io {

// BF16 and F16 are read (released checkpoints hold them) and converted to F32 / F64 on the way into a model.
enum class Dtype { F32, F64, I32, I64, U16, U32, BF16, F16 };

std::size_t dtype_size(Dtype dtype);                      // bytes per element
std::string_view dtype_name(Dtype dtype);                 // "F32", ...
std::optional<Dtype> parse_dtype(std::string_view name);  // nullopt if unknown

// Element type <-> Dtype, for the typed helpers below.
template <typename T>
struct DtypeOf;
template <>
struct DtypeOf<float> {
  static constexpr Dtype value = Dtype::F32;
};
template <>
struct DtypeOf<double> {
  static constexpr Dtype value = Dtype::F64;
};
template <>
struct DtypeOf<std::int32_t> {
  static constexpr Dtype value = Dtype::I32;
};
template <>
struct DtypeOf<std::int64_t> {
  static constexpr Dtype value = Dtype::I64;
};
template <>
struct DtypeOf<std::uint16_t> {
  static constexpr Dtype value = Dtype::U16;
};
template <>
struct DtypeOf<std::uint32_t> {
  static constexpr Dtype value = Dtype::U32;
};

class SafetensorsFile {
 public:
  struct Entry {
    std::string name;
    Dtype dtype = Dtype::F32;
    std::vector<std::int64_t> shape;
    std::span<const std::byte> data;  // little-endian bytes inside the loaded file
    std::string file;                 // path of the file, for error messages

    std::int64_t numel() const;
    // Values converted to float / double (exactly: every BF16 and F16 value is a float); the tensor must be F32, F64,
    // BF16 or F16.
    std::vector<float> to_f32_vector() const;
    std::vector<double> to_f64_vector() const;
    // Values copied out unconverted; the tensor's dtype must be exactly DtypeOf<T>.
    template <typename T>
    std::vector<T> copy_as() const {
      check_dtype(DtypeOf<T>::value);
      std::vector<T> out(static_cast<std::size_t>(numel()));
      copy_raw(out.data());
      return out;
    }

   private:
    template <typename T>
    std::vector<T> floats() const;
    void check_dtype(Dtype wanted) const;
    void copy_raw(void* out) const;
  };

  // Loads and validates `path`. `what` names the file's role in error messages, e.g.
  // "checkpoint run/x.safetensors is truncated (...)".
  static SafetensorsFile read(const std::filesystem::path& path, std::string_view what = "safetensors file");
  // Validates bytes already in memory; `source` names them in error messages.
  static SafetensorsFile parse(std::string bytes, std::string source, std::string_view what = "safetensors file");
  // Like read, but maps the file read-only instead of copying it: a released model's shards are read from the page
  // cache, only the tensors a caller touches come into memory. The file must not be truncated while it is mapped.
  static SafetensorsFile map(const std::filesystem::path& path, std::string_view what = "safetensors file");

  const std::string& path() const { return source_; }
  std::vector<std::string> names() const;                         // sorted
  const std::vector<Entry>& entries() const { return entries_; }  // sorted by name
  const Entry* find(std::string_view name) const;                 // nullptr if absent
  const Entry& at(std::string_view name) const;                   // Error if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  // Validates `bytes`, which `owner` keeps alive (a string read whole, or a mapping).
  static SafetensorsFile parse_owned(std::shared_ptr<const void> owner, std::string_view bytes, std::string source,
                                     std::string_view what);

  std::shared_ptr<const void> bytes_;  // shared so that copies keep the spans valid
  std::string source_;
  std::string what_;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write. `data` points at numel × dtype_size(dtype) little-endian bytes.
struct TensorToWrite {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
};

// The bytes a TensorToWrite points at: its shape's element count times its dtype's size (the shape is trusted: the
// caller built it from a tensor it holds).
std::string_view bytes_of(const TensorToWrite& t);

// Serializes to bytes: header keys sorted by name, header space-padded so the data section starts
// 8-byte aligned, data laid out widest dtype first then by name (every tensor naturally aligned).
std::string encode_safetensors(std::span<const TensorToWrite> entries,
                               const std::map<std::string, std::string>& metadata = {});

// encode_safetensors + write_file_atomic (temp file, fsync, rename, fsync of the directory).
void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> entries,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace normlab::io
