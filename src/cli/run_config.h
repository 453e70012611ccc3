#pragma once
// Where a run's configuration comes from: built-in defaults, then a real model's preset (--preset), then a
// JSON file, then --set overrides.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/train_config.h"

namespace normlab::cli {

struct ConfigSources {
  std::string preset;                  // --preset (model/presets.h)
  std::string file;                    // --config
  std::vector<std::string> overrides;  // --set key=value
};
void add_config_options(CLI::App* cmd, ConfigSources& sources);
train::RunConfig load_run_config(const ConfigSources& sources);

}  // namespace normlab::cli
