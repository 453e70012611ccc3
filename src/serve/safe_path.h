#pragma once
// Every path a request names goes through resolve_under: the server reads nothing else. A request
// path is refused before the file system is touched when it could climb out ('..', absolute,
// NUL or backslash), and after canonicalization when a symlink inside the root points out of it.
#include <filesystem>
#include <string>
#include <string_view>

namespace normlab::serve {

struct Resolved {
  int status = 200;            // 200, or 400 (malformed path), 403 (leaves the root), 404 (missing)
  std::filesystem::path path;  // canonical, inside the root (when status is 200)
  std::string reason;          // why not, for the error page
};

// `relative` is a percent-decoded path below `root_canonical` ("" names the root itself); the
// root must already be canonical.
Resolved resolve_under(const std::filesystem::path& root_canonical, std::string_view relative);

}  // namespace normlab::serve
