#include "serve/byte_range.h"

#include <algorithm>
#include <charconv>

namespace normlab::serve {

namespace {

// Digits only (no sign, no spaces), as a number that fits; std::nullopt for "" too.
std::optional<uint64_t> digits(std::string_view s) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || error != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<ByteRange> single_byte_range(std::string_view header, uint64_t size) {
  constexpr std::string_view kUnit = "bytes=";
  if (!header.starts_with(kUnit)) return std::nullopt;
  const std::string_view spec = header.substr(kUnit.size());
  const size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return std::nullopt;  // also refuses "a-b,c-d": the ',' is not a digit
  const std::string_view first_text = spec.substr(0, dash), last_text = spec.substr(dash + 1);
  if (first_text.empty()) {  // the last SUFFIX bytes
    const auto suffix = digits(last_text);
    if (!suffix || *suffix == 0 || size == 0) return std::nullopt;
    const uint64_t length = std::min(*suffix, size);
    return ByteRange{size - length, length};
  }
  const auto first = digits(first_text);
  if (!first || *first >= size) return std::nullopt;
  if (last_text.empty()) return ByteRange{*first, size - *first};
  const auto last = digits(last_text);
  if (!last || *last < *first) return std::nullopt;
  return ByteRange{*first, std::min(*last, size - 1) - *first + 1};
}

}  // namespace normlab::serve
