#pragma once
// Internal to src/io: nlohmann::json error text fit for a one-line normlab::Error.
#include <exception>
#include <string>
#include <string_view>

#include "common/error.h"

namespace normlab::io::detail {

// The exception's message without the "[json.exception.parse_error.101] " prefix, control
// characters replaced by '?', cut at `limit` characters.
inline std::string json_error_text(const std::exception& e, std::size_t limit = 200) {
  std::string_view text = e.what();
  if (text.starts_with("[json.exception.")) {
    if (auto end = text.find("] "); end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return printable(text, limit);
}

}  // namespace normlab::io::detail
