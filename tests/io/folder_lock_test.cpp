// The run and study folders' exclusive lock (io/folder_lock.h): a second writer is refused naming the holder's
// PID, the kernel drops the lock when its holder ends however it ends, and an orphan of an ended study is waited
// for instead of refused.
#include "io/folder_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/core.h>

#include "io/atomic_file.h"
#include "io_test_util.h"

namespace normlab::io {
namespace {

using testing::expect_error;
using testing::slurp;
using testing::TempDir;

// A child process that takes the lock of `dir` (as a study's child, with `study` in its environment when > 0),
// says so by writing `dir`/held, and holds it until it is killed or `hold` has passed.
pid_t hold_in_child(const std::filesystem::path& dir, long study, std::chrono::milliseconds hold) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (study > 0) ::setenv(kStudyPidVariable, std::to_string(study).c_str(), 1);
  else ::unsetenv(kStudyPidVariable);
  try {
    FolderLock lock(dir, "run folder");
    write_file_atomic(dir / "held", "yes");
    std::this_thread::sleep_for(hold);
  } catch (...) {
    ::_exit(2);
  }
  ::_exit(0);
}

// Waits (generously) for the child to say it holds the lock.
void wait_until_held(const std::filesystem::path& dir, pid_t child) {
  for (int i = 0; i < 6000 && !std::filesystem::exists(dir / "held"); ++i) {
    ASSERT_EQ(::waitpid(child, nullptr, WNOHANG), 0) << "the child ended without taking the lock";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(std::filesystem::exists(dir / "held"));
}

// The PID of a process that has ended (reaped).
pid_t ended_process() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(IoFolderLock, ASecondWriterIsRefusedNamingTheHolder) {
  TempDir dir;
  const auto run = dir / "run";
  {
    FolderLock first(run, "run folder");
    EXPECT_EQ(slurp(run / ".lock"), fmt::format("pid {}\n", ::getpid()));
    // A second lock of the same folder, even in the same process, is refused at once.
    expect_error([&] { FolderLock second(run, "run folder"); },
                 {"run folder", run.string(), fmt::format("PID {}", ::getpid()), "two writers",
                  fmt::format("kill {}", ::getpid())});
  }
  FolderLock again(run, "run folder");  // released with its holder
}

TEST(IoFolderLock, TheLockEndsWithItsHolderEvenKilled) {
  TempDir dir;
  const pid_t child = hold_in_child(dir.path(), 0, std::chrono::minutes(10));
  wait_until_held(dir.path(), child);
  expect_error([&] { FolderLock lock(dir.path(), "run folder"); }, {fmt::format("PID {}", child)});
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  FolderLock lock(dir.path(), "run folder");
}

// A holder started by a study that has ended is being killed with it (end_with_study): the next writer waits for
// it; a holder whose study lives is refused at once, naming both.
TEST(IoFolderLock, AnOrphanOfAnEndedStudyIsWaitedForALiveOneRefused) {
  TempDir dir;
  const pid_t orphan = hold_in_child(dir / "a", ended_process(), std::chrono::minutes(10));
  wait_until_held(dir / "a", orphan);
  // Its SIGKILL comes a little later (as a study's parent-death signal would): the lock waits for it, not refusing.
  std::thread killer([orphan] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(orphan, SIGKILL);
  });
  EXPECT_NO_THROW(FolderLock after(dir / "a", "run folder"));
  killer.join();
  ::waitpid(orphan, nullptr, 0);

  const pid_t child = hold_in_child(dir / "b", ::getpid(), std::chrono::minutes(10));
  wait_until_held(dir / "b", child);
  expect_error([&] { FolderLock lock(dir / "b", "run folder"); },
               {fmt::format("PID {}", child), fmt::format("run by the study PID {}", ::getpid())});
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(IoFolderLock, TakingTheLockRemovesTheTempFilesOfEndedWriters) {
  TempDir dir;
  const std::string dead = fmt::format("checkpoint.safetensors.tmp.{}-0", ended_process());
  std::filesystem::create_directories(dir / "run");
  testing::spit(dir / "run" / dead, "cut short by a kill");
  FolderLock lock(dir / "run", "run folder");
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / dead));
}

TEST(IoFolderLock, ALinkAtTheLockPathIsRefused) {
  TempDir dir, outside;
  testing::spit(outside / "victim", "untouched");
  std::filesystem::create_directories(dir / "run");
  std::filesystem::create_symlink(outside / "victim", dir / "run" / ".lock");
  expect_error([&] { FolderLock lock(dir / "run", "run folder"); }, {".lock", "plain file"});
  EXPECT_EQ(slurp(outside / "victim"), "untouched");
}

}  // namespace
}  // namespace normlab::io
