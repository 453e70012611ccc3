#pragma once
// The exclusive lock of a folder one process writes (a training run, a study): flock(2) on the folder's `.lock`
// file, held while the FolderLock lives and dropped by the kernel when the process ends, however it ends (kill -9
// included), so a lock is never left behind. The file names its holder (PID, and the study that started it), so a
// second writer is refused with a message naming the process to wait for or stop.
#include <filesystem>
#include <string_view>

namespace normlab::io {

// The environment variable that tells a process the PID of the study that started it (study/runner.cpp sets it).
inline constexpr const char* kStudyPidVariable = "NORMLAB_STUDY_PID";

class FolderLock {
 public:
  // Creates `dir` if needed and takes its lock; `what` names the folder in messages ("run folder"). A holder
  // whose study has ended is an orphan being killed with it (a study's children die with it): it is waited for,
  // up to a minute. Any other holder is refused at once, naming its PID. Once held, the temporary files that
  // writers which have ended left behind (write_file_atomic's, cut short by a kill) are removed.
  FolderLock(const std::filesystem::path& dir, std::string_view what);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace normlab::io
