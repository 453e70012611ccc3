#include "cli/run_config.h"

#include <CLI/CLI.hpp>

#include "io/atomic_file.h"
#include "model/presets.h"

namespace normlab::cli {

void add_config_options(CLI::App* cmd, ConfigSources& sources) {
  cmd->add_option("-p,--preset", sources.preset,
                  "start from a real model's norm choices at a small size: gpt2, bert, llama, qwen2, deepseek, glm, "
                  "gemma2, olmo2, vaswani (`normlab presets`); --config and --set override it");
  cmd->add_option("-c,--config", sources.file,
                  "JSON run config: {\"model\": {...}, \"data\": {...}, \"train\": {...}}");
  cmd->add_option("-s,--set", sources.overrides,
                  "override one field, e.g. --set model.n_layers=12 --set train.lr=3e-4 (repeatable)");
}

train::RunConfig load_run_config(const ConfigSources& sources) {
  Json doc = Json::object();
  std::string where = "built-in defaults";
  if (!sources.preset.empty()) {
    const model::Preset& preset = model::find_preset(sources.preset);
    doc["model"] = preset.model;
    if (!preset.train.empty()) doc["train"] = preset.train;
    where = "preset " + sources.preset;
  }
  if (!sources.file.empty()) {
    const Json file = parse_config_json(io::read_file(sources.file, "config file"), sources.file);
    if (sources.preset.empty()) doc = file;
    else doc.merge_patch(file);  // the file's fields over the preset's, section by section
    where = sources.preset.empty() ? sources.file : where + " with " + sources.file;
  }
  for (const auto& o : sources.overrides) apply_override(doc, o);
  if (!sources.overrides.empty()) where += " with --set overrides";
  return train::read_run_config(doc, where);
}

}  // namespace normlab::cli
