#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/config_reader.h"
#include "common/error.h"
#include "io/atomic_file.h"
#include "io/json_error.h"

namespace normlab::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data are little-endian; normlab assumes a little-endian host");

namespace {

constexpr std::string_view kMetadataKey = "__metadata__";
// The reference implementation refuses headers above 100 MB; a larger length field means the
// file is not safetensors at all (or its first bytes are damaged).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kFix = "re-save it or resume from an earlier checkpoint";

// Multiplies with an overflow check against int64.
bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t* out) {
  if (a != 0 && b > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / a) return false;
  *out = a * b;
  return true;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

struct Layout {
  std::string header;                 // 8-byte length + padded JSON
  std::vector<std::size_t> order;     // indices into the entries, in data order
  std::vector<std::uint64_t> nbytes;  // per entry (input order)
};

// One tensor's size in bytes, after refusing what cannot be written (no name, a reserved or repeated one, a negative
// or oversized shape, values missing).
std::uint64_t checked_size(const TensorToWrite& e, std::size_t index, std::set<std::string_view>& seen,
                           std::string_view target) {
  if (e.name.empty()) fail("cannot write {}: tensor #{} has an empty name: give every tensor a name", target, index);
  if (e.name == kMetadataKey) {
    fail("cannot write {}: '{}' is reserved for metadata: rename the tensor", target, kMetadataKey);
  }
  if (!seen.insert(e.name).second) {
    fail("cannot write {}: tensor '{}' appears twice: give every tensor a unique name", target, e.name);
  }
  std::uint64_t n = 1, nbytes = 0;
  for (std::int64_t d : e.shape) {
    if (d < 0 || !checked_mul(n, static_cast<std::uint64_t>(d), &n)) {
      fail("cannot write {}: tensor '{}' has invalid shape {}: dimensions must be non-negative", target, e.name,
           shape_text(e.shape));
    }
  }
  if (!checked_mul(n, dtype_size(e.dtype), &nbytes)) {
    fail("cannot write {}: tensor '{}' with shape {} is too large", target, e.name, shape_text(e.shape));
  }
  if (nbytes > 0 && e.data == nullptr) {
    fail("cannot write {}: tensor '{}' has no data pointer: pass its values", target, e.name);
  }
  return nbytes;
}

// The header's JSON text, padded to a multiple of 8 bytes, for the entries in data order.
std::string header_text(std::span<const TensorToWrite> entries, const Layout& layout,
                        const std::map<std::string, std::string>& metadata, std::string_view target) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (std::size_t i : layout.order) {
    const TensorToWrite& e = entries[i];
    header[e.name] = {
        {"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + layout.nbytes[i]}}};
    offset += layout.nbytes[i];
  }
  if (!metadata.empty()) {
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail("cannot write {}: a tensor name or metadata entry is not valid UTF-8 ({}): fix the name", target, e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

Layout plan(std::span<const TensorToWrite> entries, const std::map<std::string, std::string>& metadata,
            std::string_view target) {
  Layout layout;
  layout.nbytes.resize(entries.size());
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < entries.size(); ++i) layout.nbytes[i] = checked_size(entries[i], i, seen, target);
  // Larger elements first, so that every tensor starts aligned to its element size; by name within a size.
  layout.order.resize(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) layout.order[i] = i;
  std::sort(layout.order.begin(), layout.order.end(), [&](std::size_t a, std::size_t b) {
    std::size_t sa = dtype_size(entries[a].dtype), sb = dtype_size(entries[b].dtype);
    if (sa != sb) return sa > sb;
    return entries[a].name < entries[b].name;
  });
  const std::string text = header_text(entries, layout, metadata, target);
  std::uint64_t n = text.size();
  layout.header.resize(8);
  std::memcpy(layout.header.data(), &n, 8);
  layout.header += text;
  return layout;
}

std::vector<std::string_view> parts_of(const Layout& layout, std::span<const TensorToWrite> entries) {
  std::vector<std::string_view> parts;
  parts.reserve(entries.size() + 1);
  parts.push_back(layout.header);
  for (std::size_t i : layout.order) {
    if (layout.nbytes[i] == 0) continue;
    parts.emplace_back(static_cast<const char*>(entries[i].data), layout.nbytes[i]);
  }
  return parts;
}

}  // namespace

std::size_t dtype_size(Dtype dtype) {
  switch (dtype) {
    case Dtype::F32:
      return 4;
    case Dtype::F64:
      return 8;
    case Dtype::I32:
      return 4;
    case Dtype::I64:
      return 8;
    case Dtype::U16:
      return 2;
    case Dtype::U32:
      return 4;
    case Dtype::BF16:
    case Dtype::F16:
      return 2;
  }
  return 0;
}

std::string_view dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::F32:
      return "F32";
    case Dtype::F64:
      return "F64";
    case Dtype::I32:
      return "I32";
    case Dtype::I64:
      return "I64";
    case Dtype::U16:
      return "U16";
    case Dtype::U32:
      return "U32";
    case Dtype::BF16:
      return "BF16";
    case Dtype::F16:
      return "F16";
  }
  return "?";
}

std::optional<Dtype> parse_dtype(std::string_view name) {
  for (Dtype d : {Dtype::F32, Dtype::F64, Dtype::I32, Dtype::I64, Dtype::U16, Dtype::U32, Dtype::BF16, Dtype::F16}) {
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- Entry

std::int64_t SafetensorsFile::Entry::numel() const {
  // A zero dimension first: the other dimensions of an empty tensor may multiply past int64 (the reader
  // checked only that the product, zero, is addressable).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

void SafetensorsFile::Entry::check_dtype(Dtype wanted) const {
  if (dtype != wanted) {
    fail("tensor '{}' in {} has dtype {}, expected {}: save it as {}", name, file, dtype_name(dtype),
         dtype_name(wanted), dtype_name(wanted));
  }
}

void SafetensorsFile::Entry::copy_raw(void* out) const {
  if (!data.empty()) std::memcpy(out, data.data(), data.size());
}

namespace {

// bfloat16 is the top half of a float: shifting its bits back is exact.
float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

// IEEE half → float, exactly (every half is a float): subnormal halves become normal floats, inf and NaN stay so.
float f16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // 0 or subnormal: m · 2^−24
  return sign ? -magnitude : magnitude;
}

// The i-th element of a floating-point tensor's bytes as T (F32, F64, BF16 or F16).
template <typename T>
T element(Dtype dtype, const std::byte* data, std::size_t i) {
  switch (dtype) {
    case Dtype::F64: {
      double v;
      std::memcpy(&v, data + i * 8, 8);
      return static_cast<T>(v);
    }
    case Dtype::F32: {
      float v;
      std::memcpy(&v, data + i * 4, 4);
      return v;
    }
    default: {
      std::uint16_t bits;
      std::memcpy(&bits, data + i * 2, 2);
      return dtype == Dtype::BF16 ? bf16_to_float(bits) : f16_to_float(bits);
    }
  }
}

}  // namespace

template <typename T>
std::vector<T> SafetensorsFile::Entry::floats() const {
  if (dtype != Dtype::F32 && dtype != Dtype::F64 && dtype != Dtype::BF16 && dtype != Dtype::F16)
    fail("tensor '{}' in {} has dtype {}, expected F32, F64, BF16 or F16: save it as floating point", name, file,
         dtype_name(dtype));
  std::vector<T> out(static_cast<std::size_t>(numel()));
  if (dtype == DtypeOf<T>::value) {
    copy_raw(out.data());
    return out;
  }
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = element<T>(dtype, data.data(), i);
  return out;
}

std::vector<float> SafetensorsFile::Entry::to_f32_vector() const { return floats<float>(); }
std::vector<double> SafetensorsFile::Entry::to_f64_vector() const { return floats<double>(); }

// ---------------------------------------------------------------- reading

SafetensorsFile SafetensorsFile::read(const std::filesystem::path& path, std::string_view what) {
  return parse(read_file(path, what, "check the path", kMaxDataFileBytes), path.string(), what);
}

std::string_view bytes_of(const TensorToWrite& t) {
  std::int64_t n = 1;
  for (std::int64_t d : t.shape) n *= d;
  return {static_cast<const char*>(t.data), static_cast<std::size_t>(n) * dtype_size(t.dtype)};
}

SafetensorsFile SafetensorsFile::map(const std::filesystem::path& path, std::string_view what) {
  std::shared_ptr<const MappedFile> mapped = map_file(path, what, "check the path");
  const std::string_view bytes = mapped->bytes();
  return parse_owned(std::move(mapped), bytes, path.string(), what);
}

SafetensorsFile SafetensorsFile::parse(std::string bytes, std::string source, std::string_view what) {
  auto shared = std::make_shared<const std::string>(std::move(bytes));
  const std::string_view view = *shared;
  return parse_owned(std::move(shared), view, std::move(source), what);
}

namespace {

using Entry = SafetensorsFile::Entry;

// The 8-byte header length, then the JSON header: its text, and the data section after it.
struct Sections {
  std::string_view header;
  const std::byte* data;
  std::uint64_t data_len;
};

Sections split_sections(std::string_view buf, const std::string& src) {
  if (buf.size() < 8) {
    fail("{} is truncated ({} bytes; even the 8-byte header length is missing): {}", src, buf.size(), kFix);
  }
  std::uint64_t header_len;
  std::memcpy(&header_len, buf.data(), 8);
  const std::uint64_t after_len = buf.size() - 8;
  if (header_len > kMaxHeaderBytes) {
    fail(
        "{} is not in safetensors format (its first 8 bytes give a header length of {} bytes): check that "
        "the path points at a safetensors file",
        src, header_len);
  }
  if (header_len > after_len) {
    fail("{} is truncated (header length says {} bytes, file has only {} after it): {}", src, header_len, after_len,
         kFix);
  }
  return {std::string_view(buf.data() + 8, header_len), reinterpret_cast<const std::byte*>(buf.data() + 8 + header_len),
          after_len - header_len};
}

nlohmann::json parse_header(std::string_view header_text, const std::string& src) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {
    fail("{} has a damaged header (not valid JSON: {}): {}", src, detail::json_error_text(e), kFix);
  }
  if (json_nesting(header_text) > kMaxNesting)
    fail("{} has a damaged header (nested deeper than {} levels): {}", src, kMaxNesting, kFix);
  if (!header.is_object()) {
    fail("{} has a damaged header (JSON {} instead of an object): {}", src, header.type_name(), kFix);
  }
  return header;
}

void read_metadata(const nlohmann::json& value, const std::string& src, std::map<std::string, std::string>& out) {
  if (!value.is_object()) {
    fail("{}: '{}' is {} instead of an object of strings: {}", src, kMetadataKey, value.type_name(), kFix);
  }
  for (const auto& [mkey, mvalue] : value.items()) {
    if (!mvalue.is_string()) {
      fail("{}: metadata '{}' is {} instead of a string: {}", src, mkey, mvalue.type_name(), kFix);
    }
    out[mkey] = mvalue.get<std::string>();
  }
}

// The entry's dtype and shape; returns its size in bytes.
std::uint64_t read_dtype_and_shape(const nlohmann::json& value, const std::string& src, Entry& entry,
                                   const std::function<void(std::string_view)>& bad) {
  auto dtype_it = value.find("dtype");
  if (dtype_it == value.end() || !dtype_it->is_string()) bad("no \"dtype\" string");
  const std::string dtype_text = dtype_it->get<std::string>();
  std::optional<Dtype> dtype = parse_dtype(dtype_text);
  if (!dtype) {
    fail(
        "{}: tensor '{}' has dtype {}, which normlab does not read (known: F32, F64, BF16, "
        "F16, I32, I64, U16, U32): convert it to F32",
        src, printable(entry.name), printable(dtype_text));
  }
  entry.dtype = *dtype;
  auto shape_it = value.find("shape");
  if (shape_it == value.end() || !shape_it->is_array()) bad("no \"shape\" array");
  std::uint64_t numel = 1;
  for (const auto& d : *shape_it) {
    if (!d.is_number_unsigned()) bad("a shape entry that is not a non-negative integer");
    auto dim = d.get<std::uint64_t>();
    if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) || !checked_mul(numel, dim, &numel))
      bad("a shape too large to address");
    entry.shape.push_back(static_cast<std::int64_t>(dim));
  }
  std::uint64_t nbytes = 0;
  if (!checked_mul(numel, dtype_size(entry.dtype), &nbytes)) bad("a shape too large to address");
  return nbytes;
}

// One tensor's header entry; `data_end` grows to its end offset. Its bytes are set when they lie inside the data
// section (the caller refuses a file whose entries reach past it).
Entry read_entry(const std::string& name, const nlohmann::json& value, const std::string& src, const Sections& sections,
                 std::uint64_t& data_end) {
  auto bad = [&](std::string_view what) { fail("{}: tensor '{}' has {}: {}", src, printable(name), what, kFix); };
  if (!value.is_object()) bad("a header entry that is not an object");
  Entry entry;
  entry.name = name;
  const std::uint64_t nbytes = read_dtype_and_shape(value, src, entry, bad);
  auto off_it = value.find("data_offsets");
  if (off_it == value.end() || !off_it->is_array() || off_it->size() != 2 || !(*off_it)[0].is_number_unsigned() ||
      !(*off_it)[1].is_number_unsigned()) {
    bad("no \"data_offsets\" pair of non-negative integers");
  }
  const auto begin = (*off_it)[0].get<std::uint64_t>();
  const auto end = (*off_it)[1].get<std::uint64_t>();
  if (end < begin) {
    fail("{}: tensor '{}' has data_offsets [{}, {}] that end before they begin: {}", src, printable(name), begin, end,
         kFix);
  }
  if (end - begin != nbytes) {
    fail(
        "{}: tensor '{}' has data_offsets [{}, {}] ({} bytes) but shape {} of {} needs {} "
        "bytes: {}",
        src, printable(name), begin, end, end - begin, shape_text(entry.shape), dtype_name(entry.dtype), nbytes, kFix);
  }
  data_end = std::max(data_end, end);
  if (end <= sections.data_len) entry.data = std::span<const std::byte>(sections.data + begin, nbytes);
  return entry;
}

// No two tensors may share bytes.
void refuse_overlaps(const std::vector<Entry>& entries, const std::string& src) {
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) {
    if (!e.data.empty()) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->data.data() < b->data.data(); });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const Entry& prev = *by_offset[i - 1];
    const Entry& cur = *by_offset[i];
    if (cur.data.data() < prev.data.data() + prev.data.size()) {
      fail("{}: tensors '{}' and '{}' overlap in the data section: {}", src, printable(prev.name), printable(cur.name),
           kFix);
    }
  }
}

}  // namespace

SafetensorsFile SafetensorsFile::parse_owned(std::shared_ptr<const void> owner, std::string_view buf,
                                             std::string source, std::string_view what) {
  SafetensorsFile file;
  file.source_ = std::move(source);
  file.what_ = what;
  const std::string src = fmt::format("{} {}", what, file.source_);
  file.bytes_ = std::move(owner);
  const Sections sections = split_sections(buf, src);
  const nlohmann::json header = parse_header(sections.header, src);
  std::uint64_t data_end = 0;  // the largest end offset
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      read_metadata(value, src, file.metadata_);
      continue;
    }
    file.entries_.push_back(read_entry(key, value, src, sections, data_end));
    file.entries_.back().file = file.source_;
  }
  if (data_end > sections.data_len) {
    fail("{} is truncated (header says {} bytes of data, file has {}): {}", src, data_end, sections.data_len, kFix);
  }
  refuse_overlaps(file.entries_, src);
  std::sort(file.entries_.begin(), file.entries_.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return file;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back(e.name);
  return out;
}

const SafetensorsFile::Entry* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const Entry& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

const SafetensorsFile::Entry& SafetensorsFile::at(std::string_view name) const {
  if (const Entry* e = find(name)) return *e;
  std::string some;
  for (std::size_t i = 0; i < entries_.size() && i < 4; ++i) some += (i ? ", " : "") + entries_[i].name;
  if (entries_.size() > 4) some += fmt::format(", ... ({} in all)", entries_.size());
  fail("{} {} has no tensor '{}' (it has: {}): check the name or the file", what_, source_, name,
       entries_.empty() ? std::string("none") : some);
}

// ---------------------------------------------------------------- writing

std::string encode_safetensors(std::span<const TensorToWrite> entries,
                               const std::map<std::string, std::string>& metadata) {
  Layout layout = plan(entries, metadata, "safetensors data");
  std::string out;
  for (std::string_view part : parts_of(layout, entries)) out += part;
  return out;
}

void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> entries,
                       const std::map<std::string, std::string>& metadata) {
  Layout layout = plan(entries, metadata, path.string());
  std::vector<std::string_view> parts = parts_of(layout, entries);
  write_file_atomic(path, parts);
}

}  // namespace normlab::io
