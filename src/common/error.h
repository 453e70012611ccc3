#pragma once
// One exception type for every user-facing failure. The message is the whole report:
// it names the file or field at fault and says how to fix it. The CLI prints it on one line.
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/core.h>

namespace normlab {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Text from a file or a library, made fit for a one-line message: control characters become '?', and
// anything past `limit` characters becomes "...".
inline std::string printable(std::string_view text, std::size_t limit = 160) {
  std::string out;
  for (char c : text.substr(0, limit)) {
    auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  if (text.size() > limit) out += "...";
  return out;
}

}  // namespace normlab
