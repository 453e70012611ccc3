#include "io/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/core.h>

#include "common/error.h"
#include "io/atomic_file.h"

namespace normlab::io {

namespace {

namespace fs = std::filesystem;

constexpr const char* kLockFile = ".lock";
// How long an orphan of an ended study may take to die: its SIGKILL is already on its way (generous: a loaded
// machine may take a while to tear down a big process).
constexpr std::chrono::seconds kOrphanWait{60};

// What the lock file says of its holder: "pid N" and, when a study started it, "study M".
struct Holder {
  long pid = 0, study = 0;
};

Holder read_holder(int fd) {
  char text[128] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  Holder h;
  std::istringstream in(std::string(text, n > 0 ? static_cast<size_t>(n) : 0));
  for (std::string key; in >> key;) {
    long value = 0;
    if (!(in >> value)) break;
    if (key == "pid") h.pid = value;
    else if (key == "study") h.study = value;
  }
  return h;
}

long study_of_this_process() {
  const char* text = std::getenv(kStudyPidVariable);
  return text ? std::atol(text) : 0;
}

}  // namespace

FolderLock::FolderLock(const fs::path& dir, std::string_view what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create the {} {}: {}: check the path and its permissions", what, dir.string(), ec.message());
  const fs::path file = dir / kLockFile;
  // O_NOFOLLOW: a link planted at the lock's path is refused, not followed.
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0)
    fail("cannot open the lock file {} of the {}: {}: check that the folder is writable (and {} is a plain file)",
         file.string(), what, std::strerror(errno), kLockFile);
  const auto deadline = std::chrono::steady_clock::now() + kOrphanWait;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EINTR) continue;
    const Holder holder = read_holder(fd_);
    // An unnamed holder has only just taken the lock (it writes its name next); an orphan's study has ended.
    const bool orphan = holder.study > 0 && !process_alive(holder.study);
    const bool waiting = error == EWOULDBLOCK && (holder.pid == 0 || orphan);
    if (waiting && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    ::close(fd_);
    if (error != EWOULDBLOCK)
      fail("cannot lock the {} {} (flock on {}: {}): check the filesystem", what, dir.string(), file.string(),
           std::strerror(error));
    const std::string who =
        holder.pid == 0 ? std::string("another process") : fmt::format("another normlab process, PID {}", holder.pid);
    const std::string started = holder.study == 0 ? std::string()
                                : orphan
                                    ? fmt::format(", left running by the study PID {} that has ended", holder.study)
                                    : fmt::format(", run by the study PID {}", holder.study);
    fail(
        "the {} {} is being written by {}{}: two writers would mix their files. Wait until it ends, or stop it{} and "
        "run again",
        what, dir.string(), who, started, holder.pid == 0 ? "" : fmt::format(" (kill {})", holder.pid));
  }
  const long study = study_of_this_process();
  const std::string record =
      study > 0 ? fmt::format("pid {}\nstudy {}\n", ::getpid(), study) : fmt::format("pid {}\n", ::getpid());
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size())) {
    const int error = errno;
    ::close(fd_);
    fail("cannot write the lock file {}: {}: check the disk", file.string(), std::strerror(error));
  }
  remove_stale_temp_files(dir);
}

FolderLock::~FolderLock() {
  // Emptied first, so that the next writer to wait on the lock never reads this holder's name as its own.
  [[maybe_unused]] const int emptied = ::ftruncate(fd_, 0);
  ::close(fd_);
}

}  // namespace normlab::io
