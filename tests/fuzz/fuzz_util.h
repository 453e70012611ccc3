#pragma once
// Shared by the fuzz targets (tests/fuzz/README.md): each target feeds its input to one real reader, and
// a normlab::Error (a one-line refusal) is the expected outcome for bad input; anything else escaping,
// or a sanitizer report, is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace normlab::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input cut at each occurrence of `separator` (a multi-file input: meta.json, train.bin, ...).
inline std::vector<std::string_view> split(std::string_view text, std::string_view separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto at = text.find(separator);
    if (at == std::string_view::npos) break;
    parts.push_back(text.substr(0, at));
    text.remove_prefix(at + separator.size());
  }
  parts.push_back(text);
  return parts;
}

// A scratch directory of this process, made once, reused by every input (readers that take a path) and
// removed at exit.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir{(std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                  : std::filesystem::temp_directory_path()) /
                       ("normlab-fuzz-" + std::to_string(::getpid()))};
  static const bool made = std::filesystem::create_directories(dir.path) || true;
  (void)made;
  return dir.path;
}

}  // namespace normlab::fuzz
