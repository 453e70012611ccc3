// normlab export: a run's weights and constants for readers outside normlab (train/export.h).
#include <iostream>

#include <fmt/core.h>

#include "cli/commands.h"
#include "train/export.h"

namespace normlab::cli {

void add_export(CLI::App& app) {
  struct Args {
    std::string run, out, data;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "write a run's weights without the optimizer state (model.safetensors), a config.json with every constant a "
      "reader needs and the tokenizer into a directory that tools/to_torch.py loads alone (docs/model.md, Export)");
  cmd->add_option("-r,--run", args->run, "run directory (its checkpoint.safetensors)")->required();
  cmd->add_option("-o,--out", args->out, "the export directory (created if missing)")->required();
  cmd->add_option("--data", args->data, "the run's corpus, for its tokenizer (default: the run's data.dir)");
  cmd->callback([args] {
    const train::ExportSummary s = train::export_run(args->run, args->out, args->data);
    std::cout << fmt::format(
        "exported step {} of {}: {} weight tensors (the {} optimizer tensors left out), config.json and "
        "tokenizer.model in {}\nload it in PyTorch: /usr/bin/python3 tools/to_torch.py {}\n",
        s.step, args->run, s.tensors, s.skipped, args->out, args->out);
  });
}

}  // namespace normlab::cli
