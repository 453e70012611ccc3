#include "io/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "io_test_util.h"

namespace normlab::io {
namespace {

using testing::expect_error;
using testing::slurp;
using testing::TempDir;

TEST(IoAtomicFile, WritesReplacesAndLeavesNoTemp) {
  TempDir dir;
  const auto path = dir / "a.txt";
  write_file_atomic(path, "first version");
  EXPECT_EQ(slurp(path), "first version");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
  EXPECT_FALSE(std::filesystem::exists(dir / "a.txt.tmp"));
  // Only the target is left in the directory.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()), 1);
}

TEST(IoAtomicFile, WritesPartsAndEmptyFiles) {
  TempDir dir;
  const std::string_view parts[] = {"ab", "", "cde"};
  write_file_atomic(dir / "p.bin", std::span<const std::string_view>(parts));
  EXPECT_EQ(read_file(dir / "p.bin"), "abcde");
  write_file_atomic(dir / "empty", "");
  EXPECT_EQ(read_file(dir / "empty"), "");
  std::string big(3 << 20, 'z');  // larger than one read() chunk
  big[12345] = 'q';
  write_file_atomic(dir / "big", big);
  EXPECT_EQ(read_file(dir / "big"), big);
}

TEST(IoAtomicFile, MissingDirectoryIsAClearError) {
  TempDir dir;
  const auto path = dir / "no" / "such" / "f.txt";
  expect_error([&] { write_file_atomic(path, "x"); }, {path.string(), "does not exist", "create it"});
}

TEST(IoAtomicFile, UnwritableDirectoryLeavesNoTemp) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  TempDir dir;
  std::filesystem::create_directory(dir / "ro");
  ::chmod((dir / "ro").c_str(), 0555);
  expect_error([&] { write_file_atomic(dir / "ro" / "f", "x"); }, {"f", "writable"});
  ::chmod((dir / "ro").c_str(), 0755);
  EXPECT_FALSE(std::filesystem::exists(dir / "ro" / "f.tmp"));
}

TEST(IoAtomicFile, FailedWriteKeepsTheOldFile) {
  TempDir dir;
  const auto path = dir / "keep.txt";
  write_file_atomic(path, "old");
  std::filesystem::create_directory(dir / "keep.txt.tmp");  // the temp file cannot be created
  expect_error([&] { write_file_atomic(path, "new"); }, {path.string(), "keep.txt.tmp"});
  EXPECT_EQ(read_file(path), "old");
}

TEST(IoAtomicFile, ReadErrorsNameTheFile) {
  TempDir dir;
  expect_error([&] { read_file(dir / "missing.txt", "corpus file", "run scripts/get-kjv.sh"); },
               {"corpus file", "missing.txt", "does not exist", "run scripts/get-kjv.sh"});
  expect_error([&] { read_file(dir.path(), "token file"); }, {"is a directory"});
}

TEST(IoAtomicFile, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

}  // namespace
}  // namespace normlab::io
