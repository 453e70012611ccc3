#pragma once
// Shared helpers for the io tests: scratch directories and error-message checks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>

#include "common/error.h"

namespace normlab::io::testing {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("normlab_io_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void spit(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs `fn`, expects a normlab::Error whose message contains every fragment and is one line.
inline void expect_error(const std::function<void()>& fn, std::initializer_list<std::string_view> fragments) {
  try {
    fn();
  } catch (const normlab::Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "multi-line message: " << message;
    for (std::string_view fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos) << "message lacks \"" << fragment << "\": " << message;
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected normlab::Error, got another exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected a normlab::Error, but nothing was thrown";
}

}  // namespace normlab::io::testing
