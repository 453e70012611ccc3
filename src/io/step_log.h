#pragma once
// The logs a training run appends a line to as it goes (metrics.jsonl, probes.jsonl, probes.csv), read back when
// the run resumes: it keeps the lines up to its checkpoint's step and appends from there. A kill can cut only the
// last line short (the write in progress, always of a step after the checkpoint); any other bad line, or steps
// that go back, mean the file was damaged or written by two processes at once, and are refused: a resumed run's
// logs must be those of an uninterrupted one.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_reader.h"

namespace normlab::io {

enum class StepLogFormat {
  jsonl,  // one JSON object per line, with a whole-number "step"
  csv,    // a header row, then rows whose first field is the step
};

struct StepLine {
  std::size_t number = 0;  // in the file, from 1
  int step = 0;
  std::string text;  // without its newline
  Json record;       // the parsed line (jsonl; null for csv)
};

struct StepLog {
  std::optional<std::string> header;  // csv: the header row, once the file has one
  std::vector<StepLine> lines;
};

// The lines of a log's text, `file` naming it in messages. A last line without its newline is cut short and left
// out; blank lines are skipped. Any other line without a step, or a step below the one before it, is an Error
// naming the file and the line.
StepLog parse_step_log(std::string_view text, const std::string& file, StepLogFormat format);

// The same for a file; a missing file is an empty log, and a symbolic link is refused.
StepLog read_step_log(const std::filesystem::path& file, StepLogFormat format);

// Fails, naming the file, unless every step of `expected` has a line in `log` for which `counts` holds (all lines
// when it is empty): e.g. a training run's train records at every multiple of train.log_every up to its checkpoint.
void require_steps(const StepLog& log, const std::filesystem::path& file, const std::vector<int>& expected,
                   std::string_view what, bool (*counts)(const StepLine&) = nullptr);

// Replaces `file` (atomically) with the header and the lines of `log` up to `step`; a missing file stays missing.
void keep_steps_up_to(const std::filesystem::path& file, const StepLog& log, int step);

}  // namespace normlab::io
