// Fuzz target: a run config (config.json or --config) and its --set overrides, read as `normlab train` reads
// them: the first line is the JSON document (duplicate keys refused), each further line one --set key=value, the
// enumerated fields and switches checked against their values.
#include <cstdint>

#include "fuzz_util.h"
#include "train/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto lines = normlab::fuzz::split(normlab::fuzz::as_text(data, size), "\n");
  try {
    // As load_run_config reads a --config file: refused if not JSON or if an object repeats a key.
    normlab::Json doc = normlab::parse_config_json(lines[0], "fuzz config");
    for (std::size_t i = 1; i < lines.size(); ++i) normlab::apply_override(doc, std::string(lines[i]));
    const auto config = normlab::train::read_run_config(doc, "fuzz config");
    // What a run records must read back as the same config.
    const auto again = normlab::train::read_run_config(normlab::train::to_json(config), "recorded config");
    if (normlab::train::to_json(again) != normlab::train::to_json(config)) __builtin_trap();
    (void)normlab::train::to_json(config).dump(2);  // what every run writes as config.json
  } catch (const normlab::Error&) {
  }
  return 0;
}
