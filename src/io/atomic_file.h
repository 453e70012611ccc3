#pragma once
// Whole-file reads and crash-safe whole-file writes.
//
// write_file_atomic() writes to `path + ".tmp"`, fsyncs it, renames it over `path` and fsyncs
// the directory, so a reader sees either the old file or the complete new one, never a torn
// mix, even across a power cut. Errors are normlab::Error with a one-line message.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace normlab::io {

// Atomically replaces `path` with `bytes`. The parent directory must exist.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Same, with the contents given as consecutive parts (avoids building one big buffer).
void write_file_atomic(const std::filesystem::path& path, std::span<const std::string_view> parts);

// Reads a whole file. `what` names the file's role in error messages ("checkpoint",
// "token file", ...); `hint` is appended as the fix when the file is missing.
std::string read_file(const std::filesystem::path& path, std::string_view what = "file",
                      std::string_view hint = "check the path");

// FNV-1a, 64-bit, over raw bytes; used to tie token files to their tokenizer.
constexpr std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t hash = 0xcbf29ce484222325ULL) {
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace normlab::io
