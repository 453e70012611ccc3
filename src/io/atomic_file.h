#pragma once
// Whole-file reads, crash-safe whole-file writes and checked appends.
//
// write_file_atomic() writes to a temporary file of its own (`path.tmp.<pid>-<n>`: two writers never share
// one), fsyncs it, renames it over `path` and fsyncs the directory, so a reader sees either the old file or the
// complete new one, never a torn mix, even across a power cut. LogFile appends lines to a log (metrics.jsonl,
// probes.jsonl). Every write, flush, sync and close is checked: a failure is a WriteError naming the file and the OS
// error, never a silently truncated file. Other errors are normlab::Error with a one-line message.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/error.h"

namespace normlab::io {

// A failed write (full disk, quota, I/O error ...): callers that own other files (the trainer and its
// checkpoint) catch it to say what is still intact.
class WriteError : public Error {
 public:
  using Error::Error;
};

// Atomically replaces `path` with `bytes`. The parent directory must exist.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Same, with the contents given as consecutive parts (avoids building one big buffer).
void write_file_atomic(const std::filesystem::path& path, std::span<const std::string_view> parts);

// An append-only text file whose writes are checked. append() collects text, flush() writes it with
// write(2) and reports any failure; nothing is written behind the caller's back, so after a successful
// flush() the file holds exactly what was appended.
class LogFile {
 public:
  enum class Mode { append, truncate };
  LogFile(const std::filesystem::path& path, Mode mode);
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;
  // Closes without reporting: either close() reported already, or an error is on its way up.
  ~LogFile();

  void append(std::string_view text) { pending_.append(text); }
  void flush();
  // flush(), then close(2), reporting its error too (some filesystems report write errors only there).
  void close();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::string pending_;
  int fd_ = -1;
};

// Removes from `dir` the temporary files of write_file_atomic() calls whose process has ended (killed during the
// write) and those of older normlab versions (`name.tmp`). Only for a folder no other process writes now
// (FolderLock calls it once it holds the folder).
void remove_stale_temp_files(const std::filesystem::path& dir);

// Whether process `pid` exists (it may belong to another user).
bool process_alive(long pid);

// The most bytes read_file() reads unless told otherwise: far above any config, JSON record or metadata file.
inline constexpr std::uint64_t kMaxTextFileBytes = std::uint64_t{64} << 20;

// The cap of the big inputs: corpus text, tokenizers, token files, checkpoints (all read whole into memory).
inline constexpr std::uint64_t kMaxDataFileBytes = std::uint64_t{256} << 30;

// Reads a whole regular file of at most `max_bytes` bytes (a device, FIFO or socket, or a bigger file, is refused
// before anything is read). `what` names the file's role in error messages ("checkpoint", "token file", ...);
// `hint` is appended as the fix when the file is missing.
std::string read_file(const std::filesystem::path& path, std::string_view what = "file",
                      std::string_view hint = "check the path", std::uint64_t max_bytes = kMaxTextFileBytes);

// A file mapped read-only into memory (for files too big to copy: a released model's shards); unmapped when the last
// owner lets go.
class MappedFile {
 public:
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  std::string_view bytes() const { return {data_, static_cast<std::size_t>(size_)}; }

 private:
  MappedFile() = default;
  friend std::shared_ptr<const MappedFile> map_file(const std::filesystem::path&, std::string_view, std::string_view);
  const char* data_ = nullptr;
  std::uint64_t size_ = 0;
};

// Maps a whole regular file of at most kMaxDataFileBytes (checked as read_file does, with the same messages).
std::shared_ptr<const MappedFile> map_file(const std::filesystem::path& path, std::string_view what = "file",
                                           std::string_view hint = "check the path");

// FNV-1a, 64-bit, over raw bytes; used to tie token files to their tokenizer.
constexpr std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t hash = 0xcbf29ce484222325ULL) {
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// CRC-32 (IEEE 802.3: zlib's crc32, Python's zlib.crc32) over raw bytes, continuing from `crc` (a previous call's
// result; 0 to start). The export's checksum: its readers in Python compute it at C speed, where FNV-1a would be a
// Python loop over every byte.
std::uint32_t crc32(std::string_view bytes, std::uint32_t crc = 0);

// Fault injection for the write-failure tests. While a FailWrites lives, write operations (one
// write_file_atomic() or one LogFile::flush()) on paths that contain `path_part` fail with the OS
// error `error` once `skip` of them have succeeded; a failing LogFile::flush() first writes half its
// bytes, like a disk that fills up mid-line. In a child process, the environment variable
// NORMLAB_FAIL_WRITES=<path part>:<errno>[:<skip>] (errno as a number or a name such as ENOSPC or EIO)
// sets the same rule; it is read at the first write.
namespace testing {
class FailWrites {
 public:
  FailWrites(std::string path_part, int error, int skip = 0);
  ~FailWrites();
  FailWrites(const FailWrites&) = delete;
  FailWrites& operator=(const FailWrites&) = delete;
};
}  // namespace testing

}  // namespace normlab::io
