#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "common/error.h"

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

std::string fix_for(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return "free disk space or choose another location";
    case EACCES:
    case EPERM:
    case EROFS:
      return "check that the directory is writable";
    default:
      return "check the path and the disk";
  }
}

}  // namespace

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
  const std::string tmp = target + ".tmp";

  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    fail("cannot write {} (creating {} failed: {}): {}", target, tmp, errno_text(err), fix_for(err));
  }
  Fd file(fd);
  auto give_up = [&](std::string_view step, int err) {
    ::unlink(tmp.c_str());
    fail("cannot write {} ({} {} failed: {}): {}", target, step, tmp, errno_text(err), fix_for(err));
  };
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
      fail("cannot write {} (syncing directory {} failed: {}): {}", target, parent.string(), errno_text(err),
           fix_for(err));
    }
  }
}

std::string read_file(const std::filesystem::path& path, std::string_view what, std::string_view hint) {
  const std::string name = path.string();
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
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

  // Read straight into the result; one extra byte lets the final read see end-of-file.
  std::string out;
  std::size_t size = 0;
  out.resize(S_ISREG(st.st_mode) && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) + 1 : 1 << 16);
  for (;;) {
    if (size == out.size()) out.resize(out.size() * 2);
    ssize_t n = ::read(fd, out.data() + size, out.size() - size);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      fail("cannot read {} {}: {}: check the disk or restore the file", what, name, errno_text(err));
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  out.resize(size);
  return out;
}

}  // namespace normlab::io
