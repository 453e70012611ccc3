#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

namespace normlab::io {
namespace {

std::string errno_text(int err) { return std::generic_category().message(err); }

// Closes a descriptor on scope exit unless released.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Hands the descriptor to the caller, who closes it.
  int release() { return std::exchange(fd_, -1); }
  // Closes now and reports the close error (NFS and some filesystems report write errors here).
  int close_checked() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

int write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

constexpr std::string_view kTempMark = ".tmp.";

// The rule set by testing::fail_writes() or NORMLAB_FAIL_WRITES.
struct FaultRule {
  std::string path_part;
  int error = 0;  // 0: no rule
  int skip = 0;   // matching operations that still succeed
};

// A positive decimal number below `limit`, or -1.
int small_number(const std::string& text, int limit) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int n = std::atoi(text.c_str());
  return n < limit ? n : -1;
}

int errno_from_text(const std::string& text) {
  static constexpr std::pair<std::string_view, int> kNames[] = {
      {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}, {"EIO", EIO},     {"EROFS", EROFS},
      {"EFBIG", EFBIG},   {"EACCES", EACCES}, {"EPERM", EPERM}, {"EINTR", EINTR}};
  for (const auto& [name, value] : kNames)
    if (text == name) return value;
  return small_number(text, 4096);
}

FaultRule rule_from_environment() {
  const char* value = std::getenv("NORMLAB_FAIL_WRITES");
  if (!value || !*value) return {};
  std::vector<std::string> fields;
  std::string_view rest = value;
  for (std::size_t colon; (colon = rest.find(':')) != std::string_view::npos; rest.remove_prefix(colon + 1))
    fields.emplace_back(rest.substr(0, colon));
  fields.emplace_back(rest);
  FaultRule rule;
  if (fields.size() == 2 || fields.size() == 3) {
    rule.path_part = fields[0];
    rule.error = errno_from_text(fields[1]);
    rule.skip = fields.size() == 3 ? small_number(fields[2], 1 << 30) : 0;
  }
  if (rule.path_part.empty() || rule.error <= 0 || rule.skip < 0)
    fail("NORMLAB_FAIL_WRITES='{}' is not <path part>:<errno>[:<skip>] (e.g. metrics.jsonl:ENOSPC:2): fix or unset it",
         printable(value));
  return rule;
}

FaultRule& fault_rule() {
  static FaultRule rule = rule_from_environment();
  return rule;
}

// The error injected into this write operation on `path`, or 0.
int injected_error(const std::string& path) {
  FaultRule& rule = fault_rule();
  if (rule.error == 0 || path.find(rule.path_part) == std::string::npos) return 0;
  if (rule.skip > 0) {
    --rule.skip;
    return 0;
  }
  return rule.error;
}

template <typename... Args>
[[noreturn]] void write_failed(fmt::format_string<Args...> format, Args&&... args) {
  throw WriteError(fmt::format(format, std::forward<Args>(args)...));
}

std::string fix_for(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return "free disk space or choose another location";
    case EACCES:
    case EPERM:
    case EROFS:
      return "check that the directory is writable";
    case ELOOP:
      return "it is a symbolic link, and normlab writes only plain files: remove the link";
    default:
      return "check the path and the disk";
  }
}

// The temporary file of one write_file_atomic() call: unique to the process and the call, so two writers of one
// file (two processes, or two threads) never write through each other's.
std::string temp_name(const std::string& target) {
  static std::atomic<unsigned long> calls{0};
  return fmt::format("{}{}{}-{}", target, kTempMark, ::getpid(), calls++);
}

// The PID in a temporary file's name `X.tmp.<pid>-<n>`, or 0 for any other name.
long temp_file_writer(std::string_view name) {
  const std::size_t mark = name.rfind(kTempMark);
  if (mark == std::string_view::npos) return 0;
  const std::string_view id = name.substr(mark + kTempMark.size());
  const std::size_t dash = id.find('-');
  if (dash == std::string_view::npos || small_number(std::string(id.substr(dash + 1)), 1 << 30) < 0) return 0;
  return std::max(0, small_number(std::string(id.substr(0, dash)), 1 << 30));
}

}  // namespace

bool process_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

void remove_stale_temp_files(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const long writer = temp_file_writer(name);
    if ((writer > 0 && !process_alive(writer)) || name.ends_with(".tmp")) std::filesystem::remove(entry.path(), ec);
  }
}

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  std::string_view parts[] = {bytes};
  write_file_atomic(path, std::span<const std::string_view>(parts));
}

void write_file_atomic(const std::filesystem::path& path, std::span<const std::string_view> parts) {
  const std::string target = path.string();
  if (target.empty()) fail("cannot write a file with an empty path: give an output path");
  std::filesystem::path parent = path.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(parent, ec)) {
    fail("cannot write {}: directory {} does not exist: create it first", target, parent.string());
  }
  const std::string tmp = temp_name(target);

  // O_EXCL | O_NOFOLLOW: whatever sits at the temporary name (a link planted there) is never written through.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    write_failed("cannot write {} (creating {} failed: {}): {}", target, tmp, errno_text(err), fix_for(err));
  }
  Fd file(fd);
  auto give_up = [&](std::string_view step, int err) {
    ::unlink(tmp.c_str());
    write_failed("cannot write {} ({} {} failed: {}): {}", target, step, tmp, errno_text(err), fix_for(err));
  };
  if (int err = injected_error(target)) give_up("writing", err);
  for (std::string_view part : parts) {
    if (int err = write_all(file.get(), part)) give_up("writing", err);
  }
  if (::fsync(file.get()) != 0) give_up("syncing", errno);
  if (int err = file.close_checked()) give_up("closing", err);
  if (::rename(tmp.c_str(), target.c_str()) != 0) give_up("renaming", errno);

  // Make the rename itself durable.
  int dir = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    Fd dir_fd(dir);
    if (::fsync(dir) != 0 && errno != EINVAL && errno != EROFS) {
      int err = errno;
      write_failed("cannot write {} (syncing directory {} failed: {}): {}", target, parent.string(), errno_text(err),
                   fix_for(err));
    }
  }
}

LogFile::LogFile(const std::filesystem::path& path, Mode mode) : path_(path) {
  const auto not_regular = [&] {
    fail(
        "{} is a FIFO, socket or block device, not a file: a log written there would wait for a reader or vanish; "
        "remove it and run again",
        path_.string());
  };
  // O_NOFOLLOW: a log that is a symbolic link would put the run's records outside its directory. O_NONBLOCK: a FIFO
  // at the log's path must not hold the open until a reader comes (without one it fails with ENXIO); it is refused
  // like a socket or a block device. A character device stays allowed: /dev/null, or /dev/full in the tests.
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (mode == Mode::append ? O_APPEND : O_TRUNC);
  fd_ = ::open(path_.c_str(), flags | O_NONBLOCK, 0644);
  if (fd_ < 0) {
    const int err = errno;
    if (err == ENXIO) not_regular();
    write_failed("cannot write {} (opening it failed: {}): {}", path_.string(), errno_text(err), fix_for(err));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
    ::close(fd_);
    fd_ = -1;
    not_regular();
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);  // blocking again, as the writes expect
}

LogFile::~LogFile() {
  if (fd_ >= 0) ::close(fd_);
}

void LogFile::flush() {
  if (pending_.empty()) return;
  int err = injected_error(path_.native());
  if (err) write_all(fd_, std::string_view(pending_).substr(0, pending_.size() / 2));
  else err = write_all(fd_, pending_);
  pending_.clear();
  if (err) write_failed("cannot write {} (appending failed: {}): {}", path_.string(), errno_text(err), fix_for(err));
}

void LogFile::close() {
  flush();
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    const int err = errno;
    write_failed("cannot write {} (closing it failed: {}): {}", path_.string(), errno_text(err), fix_for(err));
  }
}

std::uint32_t crc32(std::string_view bytes, std::uint32_t crc) {
  static constexpr auto kTable = [] {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320U ^ (c >> 1) : c >> 1;
      table[n] = c;
    }
    return table;
  }();
  crc = ~crc;
  for (char b : bytes) crc = kTable[(crc ^ static_cast<unsigned char>(b)) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

namespace {

[[noreturn]] void refuse_size(std::string_view what, const std::string& name, std::uint64_t bytes,
                              std::uint64_t max_bytes) {
  fail("{} {} holds {} bytes, more than the {} bytes a {} may have: give the right file", what, name, bytes, max_bytes,
       what);
}

// Opens `path` for reading after checking that it is a regular file of at most `max_bytes` bytes; returns the
// descriptor (the caller closes it) and its size in *size.
int open_regular(const std::filesystem::path& path, std::string_view what, std::string_view hint,
                 std::uint64_t max_bytes, std::uint64_t* size) {
  const std::string name = path.string();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below like any file that is not regular.
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) fail("{} {} does not exist: {}", what, name, hint);
    if (err == EACCES) fail("cannot read {} {}: permission denied: check its permissions", what, name);
    fail("cannot read {} {}: {}: {}", what, name, errno_text(err), hint);
  }
  Fd file(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    fail("cannot read {} {}: {}: {}", what, name, errno_text(errno), hint);
  }
  if (S_ISDIR(st.st_mode)) fail("{} {} is a directory, not a file: {}", what, name, hint);
  // A device, FIFO or socket has no end to trust (/dev/zero never ends, a FIFO waits for a writer).
  if (!S_ISREG(st.st_mode)) fail("{} {} is not a regular file (a device, FIFO or socket): give a file", what, name);
  *size = static_cast<std::uint64_t>(st.st_size);
  if (*size > max_bytes) refuse_size(what, name, *size, max_bytes);
  return file.release();
}

}  // namespace

MappedFile::~MappedFile() {
  if (size_ > 0) ::munmap(const_cast<char*>(data_), size_);
}

std::shared_ptr<const MappedFile> map_file(const std::filesystem::path& path, std::string_view what,
                                           std::string_view hint) {
  std::uint64_t size = 0;
  Fd file(open_regular(path, what, hint, kMaxDataFileBytes, &size));
  auto mapped = std::shared_ptr<MappedFile>(new MappedFile());
  if (size == 0) return mapped;  // mmap refuses an empty range; an empty file is an empty view
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.get(), 0);
  if (data == MAP_FAILED)
    fail("cannot map {} {} into memory: {}: check the file and the free address space", what, path.string(),
         errno_text(errno));
  mapped->data_ = static_cast<const char*>(data);
  mapped->size_ = size;
  return mapped;
}

std::string read_file(const std::filesystem::path& path, std::string_view what, std::string_view hint,
                      std::uint64_t max_bytes) {
  const std::string name = path.string();
  std::uint64_t file_size = 0;
  Fd file(open_regular(path, what, hint, max_bytes, &file_size));
  const int fd = file.get();
  const auto too_big = [&](std::uint64_t bytes) { refuse_size(what, name, bytes, max_bytes); };

  // Read straight into the result; one extra byte lets the final read see end-of-file.
  std::string out;
  std::size_t size = 0;
  out.resize(static_cast<std::size_t>(file_size) + 1);
  for (;;) {
    if (size == out.size()) {
      if (size > max_bytes) too_big(size);  // it grew while being read
      out.resize(std::min<std::uint64_t>(out.size() * 2, max_bytes + 1));
    }
    ssize_t n = ::read(fd, out.data() + size, out.size() - size);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      fail("cannot read {} {}: {}: check the disk or restore the file", what, name, errno_text(err));
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  if (size > max_bytes) too_big(size);
  out.resize(size);
  return out;
}

namespace testing {

FailWrites::FailWrites(std::string path_part, int error, int skip) {
  fault_rule() = {std::move(path_part), error, skip};
}

FailWrites::~FailWrites() { fault_rule() = {}; }

}  // namespace testing

}  // namespace normlab::io
