// Fuzz target: a sweep file (normlab sweep FILE) as the command reads it: parsed, expanded into its grid,
// and each run's config checked by the runner's strict reader (what run_grid does before creating anything).
#include <cstdint>

#include "fuzz_util.h"
#include "study/runner.h"
#include "study/sweep.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    normlab::Json doc = normlab::Json::parse(normlab::fuzz::as_text(data, size), nullptr, false);
    if (doc.is_discarded()) return 0;  // the command refuses it: "not valid JSON"
    const auto runs = normlab::study::expand_sweep(doc, "fuzz.json");
    for (std::size_t i = 0; i < runs.size() && i < 4; ++i)
      (void)normlab::study::resolve_config(runs[i].config, runs[i].id);
  } catch (const normlab::Error&) {
  }
  return 0;
}
