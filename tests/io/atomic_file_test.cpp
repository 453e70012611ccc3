#include "io/atomic_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <thread>
#include <vector>

#include <fmt/core.h>

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

// Each write has a temporary file of its own: something at the name an older normlab shared between writers does
// not block a write, and two threads (or processes) writing one file never write into each other's temp.
TEST(IoAtomicFile, ConcurrentWritersOfOneFileNeverShareATemp) {
  TempDir dir;
  const auto path = dir / "shared.txt";
  std::filesystem::create_directory(dir / "shared.txt.tmp");
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&, w] {
      for (int i = 0; i < 100; ++i) {
        try {
          write_file_atomic(path, std::string(1000, static_cast<char>('a' + w)));
        } catch (const Error&) {
          ++failures;
        }
      }
    });
  for (auto& t : writers) t.join();
  EXPECT_EQ(failures, 0);
  const std::string last = read_file(path);
  ASSERT_EQ(last.size(), 1000u);
  EXPECT_EQ(last, std::string(1000, last[0])) << "a torn mix of two writes";
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_TRUE(e.path().filename() == "shared.txt" || e.path().filename() == "shared.txt.tmp") << e.path();
}

// Temporary files of writers that ended mid-write (killed) are removed, those of a live writer kept, and a link
// among them is removed, not followed.
TEST(IoAtomicFile, RemovesOnlyTheTempFilesOfEndedWriters) {
  TempDir dir, outside;
  testing::spit(outside / "victim", "untouched");
  pid_t ended = ::fork();
  if (ended == 0) ::_exit(0);
  ::waitpid(ended, nullptr, 0);
  const std::string live = fmt::format("a.txt.tmp.{}-7", ::getpid()), dead = fmt::format("a.txt.tmp.{}-0", ended);
  for (const std::string& name : {live, dead, std::string("old.tmp"), std::string("b.tmp.x-1")})
    testing::spit(dir / name, "partial");
  std::filesystem::create_symlink(outside / "victim", dir / fmt::format("c.tmp.{}-3", ended));
  remove_stale_temp_files(dir.path());
  std::set<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{live, "b.tmp.x-1"}));
  EXPECT_EQ(slurp(outside / "victim"), "untouched");
}

// Only regular files are read, and none bigger than the caller's cap: a device, a FIFO (no writer) or an oversized
// file is refused before anything is read.
TEST(IoAtomicFile, ReadsOnlyRegularFilesBelowTheCap) {
  TempDir dir;
  expect_error([&] { read_file("/dev/zero", "config file"); }, {"config file /dev/zero", "not a regular file"});
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  expect_error([&] { read_file(dir / "fifo", "config file"); }, {"fifo", "not a regular file"});
  testing::spit(dir / "big", "");
  std::filesystem::resize_file(dir / "big", kMaxTextFileBytes + 1);  // sparse: nothing is written
  expect_error([&] { read_file(dir / "big", "config file"); },
               {"config file", "big", fmt::format("holds {} bytes", kMaxTextFileBytes + 1)});
  testing::spit(dir / "small", "12345");
  expect_error([&] { read_file(dir / "small", "record", "check", 4); }, {"holds 5 bytes, more than the 4"});
  EXPECT_EQ(read_file(dir / "small", "record", "check", 5), "12345");
}

// A full disk mid-write (injected ENOSPC): the error names the file, the OS error and the fix, is a
// WriteError, and leaves the old file and no temp behind.
TEST(IoAtomicFile, EnospcKeepsTheOldFileAndLeavesNoTemp) {
  TempDir dir;
  const auto path = dir / "keep.txt";
  write_file_atomic(path, "old");
  {
    io::testing::FailWrites full("keep.txt", ENOSPC);
    expect_error([&] { write_file_atomic(path, "new"); },
                 {path.string(), "No space left on device", "free disk space"});
    EXPECT_THROW(write_file_atomic(path, "new"), WriteError);
    write_file_atomic(dir / "other.txt", "unaffected");  // only matching paths fail
  }
  EXPECT_EQ(read_file(path), "old");
  EXPECT_FALSE(std::filesystem::exists(dir / "keep.txt.tmp"));
  EXPECT_EQ(read_file(dir / "other.txt"), "unaffected");
  write_file_atomic(path, "new");  // the rule ends with its scope
  EXPECT_EQ(read_file(path), "new");
}

TEST(IoAtomicFile, InjectedFailuresStartAfterTheSkippedWrites) {
  TempDir dir;
  io::testing::FailWrites rule("f.txt", EIO, 2);
  write_file_atomic(dir / "f.txt", "1");
  write_file_atomic(dir / "f.txt", "2");
  expect_error([&] { write_file_atomic(dir / "f.txt", "3"); }, {"f.txt", "Input/output error"});
  expect_error([&] { write_file_atomic(dir / "f.txt", "4"); }, {"f.txt", "Input/output error"});
  EXPECT_EQ(read_file(dir / "f.txt"), "2");
}

// A stale temp file that is a symbolic link (left by an older normlab, or planted) is not written through:
// nothing lands outside the directory the caller named.
TEST(IoAtomicFile, StaleTempSymlinkIsNotWrittenThrough) {
  TempDir dir, outside;
  testing::spit(outside / "victim", "untouched");
  std::filesystem::create_directory(dir / "run");
  std::filesystem::create_symlink(outside / "victim", dir / "run" / "a.txt.tmp");
  write_file_atomic(dir / "run" / "a.txt", "new");
  EXPECT_EQ(read_file(dir / "run" / "a.txt"), "new");
  EXPECT_EQ(slurp(outside / "victim"), "untouched");
}

TEST(IoLogFile, AppendsTruncatesAndFlushesWhatWasAppended) {
  TempDir dir;
  const auto path = dir / "log.jsonl";
  {
    LogFile log(path, LogFile::Mode::truncate);
    log.append("one\n");
    EXPECT_EQ(slurp(path), "") << "nothing is written before flush()";
    log.flush();
    EXPECT_EQ(slurp(path), "one\n");
    log.append("two\n");
    log.close();
  }
  EXPECT_EQ(slurp(path), "one\ntwo\n");
  {
    LogFile log(path, LogFile::Mode::append);
    log.append("three\n");
    log.close();
  }
  EXPECT_EQ(slurp(path), "one\ntwo\nthree\n");
  LogFile fresh(path, LogFile::Mode::truncate);
  fresh.close();
  EXPECT_EQ(slurp(path), "");
}

// The kernel's own ENOSPC: /dev/full fails every write.
TEST(IoLogFile, RealEnospcFromDevFullIsReported) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  LogFile log("/dev/full", LogFile::Mode::append);
  log.append("a line\n");
  expect_error([&] { log.flush(); }, {"/dev/full", "appending failed", "No space left on device", "free disk space"});
}

TEST(IoLogFile, InjectedFailureWritesHalfAndNamesTheFile) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  LogFile log(path, LogFile::Mode::truncate);
  io::testing::FailWrites full("metrics.jsonl", ENOSPC, 1);
  log.append("0123456789\n");
  log.flush();
  log.append("abcdefghij\n");
  EXPECT_THROW(log.flush(), WriteError);
  EXPECT_EQ(slurp(path), "0123456789\nabcde") << "a disk that fills up mid-line leaves a torn last line";
}

TEST(IoLogFile, RefusesSymlinksAndUnwritablePaths) {
  TempDir dir, outside;
  std::filesystem::create_symlink(outside / "elsewhere.jsonl", dir / "metrics.jsonl");
  expect_error([&] { LogFile(dir / "metrics.jsonl", LogFile::Mode::append); },
               {"metrics.jsonl", "symbolic link", "remove the link"});
  EXPECT_FALSE(std::filesystem::exists(outside / "elsewhere.jsonl"));
  expect_error([&] { LogFile(dir / "no" / "log", LogFile::Mode::append); }, {"no/log", "opening it failed"});
}

// Issue 47.3: a FIFO at a log's path is refused at once, with or without a reader, instead of blocking the open
// until one comes (for ever, in a run folder nobody reads).
TEST(IoLogFile, RefusesAFifoWithoutWaitingForAReader) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  for (const auto mode : {LogFile::Mode::append, LogFile::Mode::truncate})
    expect_error([&] { LogFile(path, mode); }, {"metrics.jsonl is a FIFO, socket or block device", "remove it"});
  const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  expect_error([&] { LogFile(path, LogFile::Mode::append); }, {"metrics.jsonl is a FIFO"});
  ::close(reader);
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
