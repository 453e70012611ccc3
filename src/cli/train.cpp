// normlab train / normlab eval.
#include <filesystem>
#include <iostream>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/run_config.h"
#include "io/corpus.h"
#include "train/trainer.h"

namespace normlab::cli {

namespace fs = std::filesystem;

void add_train(CLI::App& app) {
  struct Args {
    ConfigSources sources;
    std::string run = "runs/default";
    bool resume = false;
    int stop_after = -1;
    bool probes = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("train",
                                     "train a model; writes config.json, metrics.jsonl, checkpoint.safetensors "
                                     "and summary.json into the run directory");
  add_config_options(cmd, args->sources);
  cmd->add_option("-r,--run", args->run, "run directory")->capture_default_str();
  cmd->add_flag("--resume", args->resume,
                "continue the run in --run from its checkpoint (its own config.json is used)");
  cmd->add_option("--stop-after", args->stop_after, "stop after this step (checkpoint saved), e.g. to test resume");
  cmd->add_flag("--probes", args->probes,
                "record probes at step 1 and every 50 steps (same as --set train.probe_every=50; docs/probes.md)");
  cmd->callback([args] {
    train::RunConfig config;
    if (args->resume) {
      if (!args->sources.file.empty() || !args->sources.overrides.empty())
        fail("--resume continues with the run's own config.json; drop --config/--set");
      config = load_run_config({(fs::path(args->run) / "config.json").string(), {}});
    } else {
      config = load_run_config(args->sources);
    }
    if (args->probes && config.train.probe_every == 0) config.train.probe_every = 50;
    train::Trainer trainer(config, args->run, {args->resume, args->stop_after, &std::cerr});
    train::TrainSummary s = trainer.run();
    if (s.steps < config.train.steps) {
      std::cout << fmt::format("stopped at step {} in {:.1f}s; continue with: normlab train --run {} --resume\n",
                               s.steps, s.seconds, args->run);
      return;
    }
    std::cout << fmt::format("done: {} steps in {:.1f}s ({:.0f} tok/s)\n", s.steps, s.seconds, s.tokens_per_second)
              << fmt::format(
                     "validation loss {:.4f} nats/token vs the val split's unigram cross-entropy {:.4f} nats/token "
                     "({})\n",
                     s.val_loss, s.unigram_val_xent,
                     s.val_loss < s.unigram_val_xent ? "below: the model learned context" : "NOT below")
              << fmt::format("run directory: {}\n", args->run);
  });
}

void add_eval(CLI::App& app) {
  struct Args {
    std::string run;
    int batches = 32;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("eval", "validation loss of a run's checkpoint");
  cmd->add_option("-r,--run", args->run, "run directory")->required();
  cmd->add_option("--batches", args->batches, "evaluation batches")->capture_default_str();
  cmd->callback([args] {
    train::Run run = train::open_run(args->run);
    const double loss = train::evaluate(*run.model, *run.loader, args->batches);
    std::cout << fmt::format(
        "step {}: validation loss {:.4f} nats/token (perplexity {:.2f}); the val split's unigram cross-entropy "
        "{:.4f}\n",
        run.step, loss, std::exp(loss), run.data.unigram_val_xent_nats);
  });
}

}  // namespace normlab::cli
