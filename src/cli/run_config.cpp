#include "cli/run_config.h"

#include <CLI/CLI.hpp>

#include "io/atomic_file.h"

namespace normlab::cli {

void add_config_options(CLI::App* cmd, ConfigSources& sources) {
  cmd->add_option("-c,--config", sources.file,
                  "JSON run config: {\"model\": {...}, \"data\": {...}, \"train\": {...}}");
  cmd->add_option("-s,--set", sources.overrides,
                  "override one field, e.g. --set model.n_layers=12 --set train.lr=3e-4 (repeatable)");
}

train::RunConfig load_run_config(const ConfigSources& sources) {
  Json doc = Json::object();
  std::string where = "built-in defaults";
  if (!sources.file.empty()) {
    doc = Json::parse(io::read_file(sources.file, "config file"), nullptr, false);
    if (doc.is_discarded()) fail("{}: not valid JSON", sources.file);
    where = sources.file;
  }
  for (const auto& o : sources.overrides) apply_override(doc, o);
  if (!sources.overrides.empty()) where += " with --set overrides";
  return train::read_run_config(doc, where);
}

}  // namespace normlab::cli
