#include "io/step_log.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <system_error>

#include "io/atomic_file.h"

namespace normlab::io {

namespace {

constexpr const char* kFix =
    "restore the file from a copy or train the run anew (a resumed run's logs must be an uninterrupted run's)";

// The step a line records, or a message saying why it has none.
int step_of(StepLine& line, const std::string& file, StepLogFormat format) {
  const auto bad = [&](std::string_view why) -> int {
    fail("{} line {} {}: the file is damaged; {}", file, line.number, why, kFix);
  };
  std::string_view text = line.text;
  if (format == StepLogFormat::csv) {
    const std::string_view field = text.substr(0, text.find(','));
    int step = -1;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), step);
    if (error != std::errc() || end != field.data() + field.size() || step < 0)
      return bad(fmt::format("starts with '{}', not a step", printable(field, 40)));
    return step;
  }
  line.record = parse_json_or_discarded(text);
  if (line.record.is_discarded() || !line.record.is_object())
    return bad(fmt::format("is not a JSON object ('{}')", printable(text, 60)));
  const auto it = line.record.find("step");
  if (it == line.record.end()) return bad("has no \"step\"");
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() > INT_MAX)
    return bad(fmt::format("has \"step\": {}, not a whole number of steps", printable(it->dump(), 40)));
  return it->get<int>();
}

}  // namespace

StepLog parse_step_log(std::string_view text, const std::string& file, StepLogFormat format) {
  StepLog log;
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    if (end == std::string_view::npos) break;  // the last line, cut short by a kill or a full disk: left out
    StepLine line{.number = ++number, .text = std::string(text.substr(0, end))};
    text.remove_prefix(end + 1);
    if (format == StepLogFormat::csv && number == 1) {
      log.header = line.text;
      continue;
    }
    if (line.text.find_first_not_of(" \t\r") == std::string::npos) continue;
    line.step = step_of(line, file, format);
    if (!log.lines.empty() && line.step < log.lines.back().step)
      fail(
          "{} line {} records step {} after step {}: the steps go back, as when two processes write one run at once; "
          "{}",
          file, line.number, line.step, log.lines.back().step, kFix);
    log.lines.push_back(std::move(line));
  }
  return log;
}

StepLog read_step_log(const std::filesystem::path& file, StepLogFormat format) {
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(file, ec);
  if (!std::filesystem::exists(status)) return {};
  if (std::filesystem::is_symlink(status))
    fail(
        "{} is a symbolic link, not the run's log: a run writes only plain files inside its folder; remove the link "
        "and restore the log",
        file.string());
  return parse_step_log(read_file(file, "log", "check the path", kMaxDataFileBytes), file.string(), format);
}

void require_steps(const StepLog& log, const std::filesystem::path& file, const std::vector<int>& expected,
                   std::string_view what, bool (*counts)(const StepLine&)) {
  std::vector<int> missing;
  for (int step : expected)
    if (std::none_of(log.lines.begin(), log.lines.end(),
                     [&](const StepLine& l) { return l.step == step && (!counts || counts(l)); }))
      missing.push_back(step);
  if (missing.empty()) return;
  const std::size_t shown = std::min<std::size_t>(missing.size(), 5);
  const char* plural = missing.size() == 1 ? "" : "s";
  fail("{} lacks the {}{} of step{} {}{}: lines are missing; {}", file.string(), what, plural, plural,
       fmt::join(missing.begin(), missing.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
       missing.size() > shown ? fmt::format(" and {} more", missing.size() - shown) : "", kFix);
}

void keep_steps_up_to(const std::filesystem::path& file, const StepLog& log, int step) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec))) return;
  std::string kept = log.header ? *log.header + "\n" : std::string();
  for (const StepLine& line : log.lines)
    if (line.step <= step) kept += line.text + "\n";
  write_file_atomic(file, kept);
}

}  // namespace normlab::io
