// Fuzz target: the logs a resumed run reads back (metrics.jsonl, probes.jsonl, probes.csv; io/step_log.h), then
// cuts back to a step: the first byte picks the format (even: JSON lines, odd: CSV) and the step to keep up to, the
// rest is the file. Every line kept must keep its step, in order, and cutting must not add a line.
#include <cstdint>

#include "fuzz_util.h"
#include "io/atomic_file.h"
#include "io/step_log.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto format = data[0] % 2 == 0 ? normlab::io::StepLogFormat::jsonl : normlab::io::StepLogFormat::csv;
  const int keep = data[0] / 2;
  try {
    const normlab::io::StepLog log =
        normlab::io::parse_step_log(normlab::fuzz::as_text(data + 1, size - 1), "fuzz.log", format);
    for (std::size_t i = 1; i < log.lines.size(); ++i)
      if (log.lines[i].step < log.lines[i - 1].step) __builtin_trap();
    const auto file = normlab::fuzz::scratch_dir() / "fuzz.log";
    normlab::io::write_file_atomic(file, "");
    normlab::io::keep_steps_up_to(file, log, keep);
    const normlab::io::StepLog kept = normlab::io::read_step_log(file, format);
    std::size_t expected = 0;
    for (const auto& line : log.lines) expected += line.step <= keep;
    if (kept.lines.size() != expected) __builtin_trap();
    normlab::io::require_steps(kept, file, {1, keep}, "record");
  } catch (const normlab::Error&) {
  }
  return 0;
}
