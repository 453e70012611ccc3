#pragma once
// One exception type for every user-facing failure. The message is the whole report:
// it names the file or field at fault and says how to fix it. The CLI prints it on one line.
#include <stdexcept>
#include <string>

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

}  // namespace normlab
