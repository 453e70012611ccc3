#include "serve/safe_path.h"

#include <algorithm>

namespace normlab::serve {

namespace fs = std::filesystem;

namespace {

// Whether `p` is `root` or below it, compared component by component (so /runs2 is not under /runs).
bool inside(const fs::path& p, const fs::path& root) {
  const auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
  return r == root.end();
}

}  // namespace

Resolved resolve_under(const fs::path& root_canonical, std::string_view relative) {
  if (relative.find('\0') != std::string_view::npos || relative.find('\\') != std::string_view::npos)
    return {400, {}, "the path holds a NUL or a backslash"};
  if (relative.starts_with('/'))
    return {400, {}, "absolute paths are refused: paths are relative to the served folder"};
  for (size_t start = 0; start <= relative.size();) {
    const size_t slash = std::min(relative.find('/', start), relative.size());
    if (relative.substr(start, slash - start) == "..")
      return {400, {}, "'..' is refused: paths stay inside the served folder"};
    start = slash + 1;
  }
  std::error_code ec;
  const fs::path full = root_canonical / fs::path(relative).relative_path();
  if (!fs::exists(full, ec)) return {404, {}, "no such file in the served folder"};
  const fs::path canonical = fs::canonical(full, ec);  // resolves every symlink on the way
  if (ec) return {404, {}, "cannot resolve the path: " + ec.message()};
  if (!inside(canonical, root_canonical)) return {403, {}, "a symlink leads out of the served folder"};
  return {200, canonical, ""};
}

}  // namespace normlab::serve
