// Fuzz target: a sweep file (normlab sweep FILE) as the command reads it: parsed, expanded into its grid,
// and each run's config checked by the runner's strict reader (what run_grid does before creating anything).
#include <cstdint>

#include "fuzz_util.h"
#include "study/runner.h"
#include "study/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const normlab::Json doc = normlab::parse_config_json(normlab::fuzz::as_text(data, size), "fuzz.json");
    const auto runs = normlab::study::expand_sweep(doc, "fuzz.json");
    for (std::size_t i = 0; i < runs.size() && i < 4; ++i)
      (void)normlab::study::resolve_config(runs[i].config, runs[i].id);
  } catch (const normlab::Error&) {
  }
  return 0;
}
