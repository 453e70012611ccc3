#include "study/sweep.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iostream>

namespace normlab::study {

namespace {

// A grid value as part of a folder name: anything but letters, digits and . _ + = - becomes '_', so a
// value such as "../x" or "/abs" cannot lead the run out of the sweep folder.
std::string folder_safe(std::string text) {
  for (char& c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && (c == '\0' || !std::strchr("._+=-", c))) c = '_';
  return text;
}

// A grid key must name one field, e.g. model.norm.type: a key naming a section (model.norm), or a value that is an
// object, would replace the whole section, silently setting every field the value leaves out to its default.
void require_leaf_field(const std::string& key, const Json& values, const std::string& where) {
  static const Json defaults = resolve_config(Json::object(), "the built-in defaults");
  const Json* node = &defaults;
  for (size_t start = 0; node && start <= key.size();) {
    const size_t dot = std::min(key.find('.', start), key.size());
    const std::string part = key.substr(start, dot - start);
    node = node->is_object() && node->contains(part) ? &(*node)[part] : nullptr;
    start = dot + 1;
  }
  std::vector<std::string> fields;
  if (node && node->is_object())
    for (const auto& [field, value] : node->items()) fields.push_back(fmt::format("{}.{}", key, field));
  const bool object_value = std::any_of(values.begin(), values.end(), [](const Json& v) { return v.is_object(); });
  if (!fields.empty() || object_value)
    fail("{}: grid key '{}' names a whole section, which its values would replace: vary one field of it{}", where,
         printable(key, 60),
         fields.empty() ? std::string() : fmt::format(" ({})", printable(fmt::format("{}", fmt::join(fields, ", ")))));
}

}  // namespace

std::vector<RunRequest> expand_sweep(const Json& doc, const std::string& where) {
  if (!doc.is_object() || !doc.contains("grid") || !doc["grid"].is_object())
    fail("{}: expected {{\"base\": {{run config}}, \"grid\": {{\"key.path\": [values...]}}, \"seeds\": n}}", where);
  for (const auto& [key, value] : doc.items())
    if (key != "base" && key != "grid" && key != "seeds")
      fail("{}: unknown key '{}' (known keys: base, grid, seeds)", where, printable(key, 60));
  const Json base = doc.value("base", Json::object());
  if (!base.is_object()) fail("{}: base must be a run config object {{\"model\": ..., \"train\": ...}}", where);
  const Json seeds_json = doc.value("seeds", Json(1));
  if (!seeds_json.is_number_integer() || seeds_json.get<std::int64_t>() < 1 || seeds_json.get<std::int64_t>() > 100)
    fail("{}: seeds must be a whole number from 1 to 100, not {}", where, printable(seeds_json.dump(), 60));
  const int seeds = seeds_json.get<int>();
  std::size_t total = static_cast<std::size_t>(seeds);
  std::vector<std::pair<std::string, Json>> axes;
  for (const auto& [key, values] : doc["grid"].items()) {
    if (key.empty() || key.find('=') != std::string::npos)
      fail("{}: grid key '{}' must be a field path such as model.placement", where, printable(key, 60));
    if (!values.is_array() || values.empty())
      fail("{}: grid.{} must be a non-empty list of values", where, printable(key, 60));
    require_leaf_field(key, values, where);
    total *= values.size();
    if (total > kMaxSweepRuns)
      fail("{}: the grid asks for more than {} runs: split it into several sweeps", where, kMaxSweepRuns);
    axes.emplace_back(key, values);
  }
  std::vector<RunRequest> runs{{"", base, "train", ""}};
  for (const auto& [key, values] : axes) {
    std::vector<RunRequest> next;
    for (const auto& run : runs)
      for (const Json& v : values) {
        RunRequest r = run;
        // Appended piece by piece: GCC 12's -Wrestrict misfires on `string + "literal" + string` here.
        std::string assignment = key;
        apply_override(r.config, assignment.append("=").append(v.dump()));
        std::string part = key.substr(key.rfind('.') + 1);
        part.append("-").append(v.is_string() ? v.get<std::string>() : v.dump());
        if (!r.id.empty()) r.id.append("_");
        r.id.append(folder_safe(part));
        next.push_back(r);
      }
    runs = next;
  }
  std::vector<RunRequest> seeded;
  for (int seed = 1; seed <= seeds; ++seed)
    for (RunRequest r : runs) {
      apply_override(r.config, fmt::format("train.seed={}", seed));
      r.id += fmt::format("_s{}", seed);
      seeded.push_back(r);
    }
  return seeded;
}

void require_no_failed_runs(const std::vector<RunOutcome>& outcomes, const std::filesystem::path& summary) {
  size_t failed = 0;
  for (const RunOutcome& o : outcomes)
    if (o.status == RunStatus::failed) {
      ++failed;
      std::cerr << fmt::format("sweep: failed run {}: {}\n", o.request.id, o.message);
    }
  if (failed > 0)
    fail(
        "{} of the sweep's {} runs failed (listed above and in {}): fix the cause and rerun the same command; the "
        "finished runs are reused",
        failed, outcomes.size(), summary.string());
}

}  // namespace normlab::study
