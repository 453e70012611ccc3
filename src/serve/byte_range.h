#pragma once
// The Range header of a /files request. One range within the file is served (206); anything else a
// client may send (several ranges, a start past the end, a malformed header) is refused with 416, so
// a reply is never longer than the file and never announces a length it cannot have.
#include <cstdint>
#include <optional>
#include <string_view>

namespace normlab::serve {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;  // at least 1
};

// "bytes=FIRST-LAST", "bytes=FIRST-" or "bytes=-SUFFIX" (RFC 9110 §14.1.2) against a file of `size` bytes; a LAST
// past the end is cut to the end, as the RFC says. std::nullopt when the header is anything else or the range
// holds no byte of the file.
std::optional<ByteRange> single_byte_range(std::string_view header, uint64_t size);

}  // namespace normlab::serve
