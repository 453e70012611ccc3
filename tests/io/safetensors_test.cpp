#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io_test_util.h"

namespace normlab::io {
namespace {

using testing::expect_error;
using testing::slurp;
using testing::spit;
using testing::TempDir;

// Builds a safetensors file by hand: header JSON text (padded to 8) and raw data.
std::string raw_file(std::string header, std::string_view data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data);
}

template <typename T>
std::vector<T> iota_values(std::size_t n, T start) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i));
  return v;
}

template <typename T>
std::vector<T> bytes_as(std::span<const std::byte> data) {
  std::vector<T> out(data.size() / sizeof(T));
  std::memcpy(out.data(), data.data(), data.size());
  return out;
}

TEST(IoSafetensors, RoundTripsEveryDtypeAndMetadata) {
  TempDir dir;
  const auto f32 = iota_values<float>(6, 0.5f);
  const auto f64 = iota_values<double>(4, -1.25);
  const auto i32 = iota_values<std::int32_t>(5, -2);
  const auto i64 = iota_values<std::int64_t>(3, 1LL << 40);
  const auto u16 = iota_values<std::uint16_t>(7, 65530);  // wraps: exercises the full range
  const auto u32 = iota_values<std::uint32_t>(2, 4000000000u);
  const float scalar = 3.0f;
  const std::vector<TensorToWrite> tensors = {
      {"layers.0.attn.q.weight", Dtype::F32, {2, 3}, f32.data()},
      {"b.f64", Dtype::F64, {4}, f64.data()},
      {"c.i32", Dtype::I32, {5, 1}, i32.data()},
      {"d.i64", Dtype::I64, {3}, i64.data()},
      {"e.u16", Dtype::U16, {7}, u16.data()},
      {"f.u32", Dtype::U32, {1, 2}, u32.data()},
      {"g.scalar", Dtype::F32, {}, &scalar},
      {"h.empty", Dtype::F32, {0, 3}, nullptr},
  };
  const std::map<std::string, std::string> metadata = {{"step", "120"}, {"config", R"({"d": 64})"}};
  const auto path = dir / "x.safetensors";
  write_safetensors(path, tensors, metadata);

  const SafetensorsFile file = SafetensorsFile::read(path);
  EXPECT_EQ(file.metadata(), metadata);
  EXPECT_EQ(file.names(), (std::vector<std::string>{"b.f64", "c.i32", "d.i64", "e.u16", "f.u32", "g.scalar", "h.empty",
                                                    "layers.0.attn.q.weight"}));
  const auto& q = file.at("layers.0.attn.q.weight");
  EXPECT_EQ(q.dtype, Dtype::F32);
  EXPECT_EQ(q.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(q.to_f32_vector(), f32);
  EXPECT_EQ(file.at("b.f64").to_f64_vector(), f64);
  EXPECT_EQ(file.at("c.i32").copy_as<std::int32_t>(), i32);
  EXPECT_EQ(bytes_as<std::int64_t>(file.at("d.i64").data), i64);
  EXPECT_EQ(file.at("e.u16").copy_as<std::uint16_t>(), u16);
  EXPECT_EQ(file.at("f.u32").copy_as<std::uint32_t>(), u32);
  EXPECT_EQ(file.at("g.scalar").numel(), 1);
  EXPECT_EQ(file.at("g.scalar").to_f32_vector(), std::vector<float>{3.0f});
  EXPECT_EQ(file.at("h.empty").numel(), 0);
  EXPECT_TRUE(file.at("h.empty").to_f32_vector().empty());
  EXPECT_EQ(file.find("nope"), nullptr);

  // Conversions between the two float types.
  const auto widened = q.to_f64_vector();
  for (std::size_t i = 0; i < f32.size(); ++i) EXPECT_EQ(widened[i], static_cast<double>(f32[i]));
  EXPECT_EQ(file.at("b.f64").to_f32_vector()[1], -0.25f);

  // In-memory encoding gives the same bytes as the file.
  EXPECT_EQ(encode_safetensors(tensors, metadata), slurp(path));
}

TEST(IoSafetensors, HeaderIsPaddedAndDataNaturallyAligned) {
  TempDir dir;
  const std::uint16_t u16[3] = {1, 2, 3};
  const double f64[2] = {1, 2};
  const float f32[1] = {1};
  const std::vector<TensorToWrite> tensors = {
      {"a", Dtype::U16, {3}, u16}, {"b", Dtype::F32, {1}, f32}, {"c", Dtype::F64, {2}, f64}};
  const auto path = dir / "aligned.safetensors";
  write_safetensors(path, tensors);
  const std::string bytes = slurp(path);
  std::uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes.substr(8 + n - 1, 1).find_first_not_of(" }"), std::string::npos);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_FALSE(header.contains("__metadata__"));  // omitted when empty
  for (const auto& [name, entry] : header.items()) {
    const auto begin = entry["data_offsets"][0].get<std::uint64_t>();
    EXPECT_EQ(begin % dtype_size(*parse_dtype(entry["dtype"].get<std::string>())), 0u) << name;
  }
  EXPECT_EQ(header["c"]["data_offsets"][0], 0);  // widest first
}

TEST(IoSafetensors, ReadsHandWrittenFile) {
  // Written the way other tools (e.g. tools/safetensors_py.py) lay files out: compact JSON.
  const float values[2] = {1.5f, -2.0f};
  std::string data(reinterpret_cast<const char*>(values), sizeof values);
  const auto file = SafetensorsFile::parse(
      raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}})", data),
      "mem.safetensors");
  EXPECT_EQ(file.at("w").to_f32_vector(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(file.metadata().at("format"), "pt");
}

// Released checkpoints hold BF16 and F16; every value of either is a float, so both widen exactly: normal and
// subnormal halves, the largest half, signed zero and infinities.
TEST(IoSafetensors, Bf16AndF16AreWidenedExactly) {
  const std::uint16_t bf16[] = {0x3F80, 0xC020, 0x3EAB, 0x0001, 0x7F80};
  const std::vector<float> bf16_values = {1.0f, -2.5f, 0.333984375f, 0x1p-133f, INFINITY};
  const std::uint16_t f16[] = {0x3C00, 0xC100, 0x7BFF, 0x0001, 0x03FF, 0x8000, 0xFC00};
  const std::vector<float> f16_values = {1.0f, -2.5f, 65504.0f, 0x1p-24f, 1023 * 0x1p-24f, -0.0f, -INFINITY};
  TempDir dir;
  write_safetensors(dir / "half.safetensors",
                    std::vector<TensorToWrite>{{"b", Dtype::BF16, {5}, bf16}, {"h", Dtype::F16, {7}, f16}});
  const auto file = SafetensorsFile::read(dir / "half.safetensors");
  EXPECT_EQ(file.at("b").to_f32_vector(), bf16_values);
  EXPECT_EQ(file.at("h").to_f32_vector(), f16_values);
  EXPECT_TRUE(std::signbit(file.at("h").to_f32_vector()[5]));
  const std::vector<double> wide = file.at("h").to_f64_vector();
  EXPECT_EQ(wide, std::vector<double>(f16_values.begin(), f16_values.end()));
}

// map() shares the file with the page cache instead of copying it, and checks it as read() does.
TEST(IoSafetensors, MapGivesWhatReadGivesAndChecksTheSame) {
  TempDir dir;
  const std::vector<float> a = iota_values<float>(6, 0.5f);
  const std::vector<std::int64_t> b = iota_values<std::int64_t>(3, -1);
  write_safetensors(dir / "x.safetensors",
                    std::vector<TensorToWrite>{{"a", Dtype::F32, {2, 3}, a.data()}, {"b", Dtype::I64, {3}, b.data()}},
                    {{"k", "v"}});
  const auto mapped = SafetensorsFile::map(dir / "x.safetensors");
  EXPECT_EQ(mapped.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(mapped.at("a").to_f32_vector(), a);
  EXPECT_EQ(mapped.at("b").copy_as<std::int64_t>(), b);
  EXPECT_EQ(mapped.metadata().at("k"), "v");
  const std::string good = slurp(dir / "x.safetensors");
  spit(dir / "x.safetensors", good.substr(0, good.size() - 1));
  expect_error([&] { SafetensorsFile::map(dir / "x.safetensors", "shard"); },
               {"shard " + (dir / "x.safetensors").string() + " is truncated"});
  spit(dir / "x.safetensors", "");
  expect_error([&] { SafetensorsFile::map(dir / "x.safetensors"); }, {"is truncated (0 bytes"});
  expect_error([&] { SafetensorsFile::map(dir / "absent.safetensors"); }, {"absent.safetensors", "does not exist"});
}

class IoSafetensorsCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<float> a(10, 1.0f);
    const std::vector<std::int32_t> b(3, 7);
    write_safetensors(path_,
                      std::vector<TensorToWrite>{{"a", Dtype::F32, {2, 5}, a.data()}, {"b", Dtype::I32, {3}, b.data()}},
                      {{"k", "v"}});
    good_ = slurp(path_);
    std::memcpy(&header_len_, good_.data(), 8);
  }
  // Expects reading the (modified) file to fail with the file's name and the fragments.
  void expect_read_error(std::initializer_list<std::string_view> fragments) {
    const std::string name = path_.string();
    expect_error([&] { SafetensorsFile::read(path_); }, {name});
    expect_error([&] { SafetensorsFile::read(path_); }, fragments);
  }
  TempDir dir_;
  std::filesystem::path path_ = dir_ / "ck.safetensors";
  std::string good_;
  std::uint64_t header_len_ = 0;
};

TEST_F(IoSafetensorsCorruption, TooShortForTheLengthField) {
  spit(path_, good_.substr(0, 5));
  expect_read_error({"truncated", "5 bytes"});
}

TEST_F(IoSafetensorsCorruption, EmptyFile) {
  spit(path_, "");
  expect_read_error({"truncated"});
}

TEST_F(IoSafetensorsCorruption, HeaderLongerThanFile) {
  spit(path_, good_.substr(0, 8 + header_len_ / 2));
  expect_read_error({"truncated", std::to_string(header_len_)});
}

TEST_F(IoSafetensorsCorruption, TruncatedData) {
  spit(path_, good_.substr(0, good_.size() - 6));
  expect_read_error({"is truncated (header says 52 bytes of data, file has 46)", "earlier checkpoint"});
}

TEST_F(IoSafetensorsCorruption, NotSafetensorsAtAll) {
  spit(path_, "this is a text file, not a checkpoint\n");
  expect_read_error({"not in safetensors format"});
}

TEST_F(IoSafetensorsCorruption, FlippedHeaderBytesAreBadJson) {
  std::string bad = good_;
  bad[8] = 'x';  // the opening brace
  spit(path_, bad);
  expect_read_error({"not valid JSON"});
  bad = good_;
  bad[bad.find(':')] = ';';
  spit(path_, bad);
  expect_read_error({"not valid JSON"});
}

TEST_F(IoSafetensorsCorruption, UnknownDtype) {
  std::string bad = good_;
  const auto at = bad.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 5, "\"Q32\"");
  spit(path_, bad);
  expect_read_error({"tensor 'a'", "dtype Q32"});
}

TEST_F(IoSafetensorsCorruption, OffsetsOutOfRange) {
  spit(path_, raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", std::string(8, '\0')));
  expect_read_error({"truncated (header says 16 bytes of data, file has 8)"});
}

TEST_F(IoSafetensorsCorruption, OffsetsDisagreeWithShape) {
  spit(path_, raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(12, '\0')));
  expect_read_error({"tensor 'a'", "data_offsets [0, 8]", "needs 12 bytes"});
}

TEST_F(IoSafetensorsCorruption, OffsetsBackwards) {
  spit(path_, raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", std::string(8, '\0')));
  expect_read_error({"tensor 'a'", "end before they begin"});
}

TEST_F(IoSafetensorsCorruption, OverlappingTensors) {
  spit(path_, raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       std::string(12, '\0')));
  expect_read_error({"'a' and 'b' overlap"});
}

TEST_F(IoSafetensorsCorruption, MalformedEntries) {
  spit(path_, raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, '\0')));
  expect_read_error({"tensor 'a'", "shape"});
  spit(path_, raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", std::string(8, '\0')));
  expect_read_error({"tensor 'a'", "data_offsets"});
  spit(path_, raw_file(R"({"__metadata__":{"step":3}})", ""));
  expect_read_error({"metadata 'step'"});
  spit(path_, raw_file(R"([1,2,3])", ""));
  expect_read_error({"instead of an object"});
}

TEST_F(IoSafetensorsCorruption, MissingTensorAndWrongDtype) {
  const auto file = SafetensorsFile::read(path_);
  expect_error([&] { file.at("layers.3.ffn.fc1.weight"); }, {"layers.3.ffn.fc1.weight", path_.string()});
  expect_error([&] { file.at("b").to_f32_vector(); }, {"tensor 'b'", path_.string(), "I32"});
  expect_error([&] { file.at("a").copy_as<double>(); }, {"tensor 'a'", "F32", "expected F64"});
}

TEST_F(IoSafetensorsCorruption, ErrorNamesTheRole) {
  spit(path_, good_.substr(0, good_.size() - 1));
  expect_error([&] { SafetensorsFile::read(path_, "checkpoint"); }, {"checkpoint " + path_.string() + " is truncated"});
}

TEST(IoSafetensors, MissingFile) {
  TempDir dir;
  expect_error([&] { SafetensorsFile::read(dir / "absent.safetensors"); }, {"absent.safetensors", "does not exist"});
}

TEST(IoSafetensors, WriterRejectsBadInput) {
  TempDir dir;
  const float v[2] = {0, 0};
  const auto path = dir / "w.safetensors";
  expect_error(
      [&] {
        write_safetensors(path, std::vector<TensorToWrite>{{"a", Dtype::F32, {2}, v}, {"a", Dtype::F32, {2}, v}});
      },
      {path.string(), "'a' appears twice"});
  expect_error(
      [&] {
        write_safetensors(path, std::vector<TensorToWrite>{{"a", Dtype::F32, {-1}, v}});
      },
      {path.string(), "shape [-1]"});
  expect_error(
      [&] {
        write_safetensors(path, std::vector<TensorToWrite>{{"a", Dtype::F32, {2}, nullptr}});
      },
      {path.string(), "no data"});
  expect_error(
      [&] {
        write_safetensors(path, std::vector<TensorToWrite>{{"__metadata__", Dtype::F32, {2}, v}});
      },
      {"reserved"});
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace normlab::io
