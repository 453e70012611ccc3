// normlab train / normlab eval.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <vector>

#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/run_config.h"
#include "dist/comm.h"
#include "io/corpus.h"
#include "io/safetensors.h"
#include "train/trainer.h"

namespace normlab::cli {

namespace fs = std::filesystem;

namespace {

// normlab train --dry-run: the model and its memory, without allocating or writing anything.
void print_plan(const train::RunConfig& config, const train::MemoryNeeds& needs) {
  const train::Run run = train::plan_run(config, 0, needs);
  const train::MemoryEstimate& e = run.memory;
  const train::AvailableMemory available = train::available_memory();
  const model::ModelConfig& m = run.config.model;
  std::cout << fmt::format("model: {}, {} layers, d_model {}, d_ff {}, vocabulary {}: {} parameters\n", m.placement,
                           m.n_layers, m.d_model, m.d_ff, m.vocab_size, e.parameter_count)
            << fmt::format("memory: estimated peak {} ({})\n", train::human_bytes(e.peak()), e.breakdown())
            << fmt::format("available: {} more ({}): {}\n", train::human_bytes(available.bytes), available.source,
                           e.to_allocate() <= available.bytes ? "fits" : "does NOT fit; training would be refused");
}

}  // namespace

void add_train(CLI::App& app) {
  struct Args {
    ConfigSources sources;
    std::string run = "runs/default";
    bool resume = false;
    int stop_after = -1;
    bool probes = false;
    bool dry_run = false;
    bool profile = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("train",
                                     "train a model; writes config.json, metrics.jsonl, checkpoint.safetensors "
                                     "and summary.json into the run directory");
  add_config_options(cmd, args->sources);
  cmd->add_option("-r,--run", args->run, "run directory")->capture_default_str();
  cmd->add_flag("--resume", args->resume,
                "continue the run in --run from its checkpoint (its own config.json is used)");
  CLI::Option* stop_after =
      cmd->add_option("--stop-after", args->stop_after, "stop after this step (checkpoint saved), e.g. to test resume");
  cmd->add_flag("--probes", args->probes,
                "record probes at step 1 and every 50 steps (same as --set train.probe_every=50; docs/probes.md)");
  cmd->add_flag("--dry-run", args->dry_run,
                "print the parameter count and the memory estimate against the available memory, then stop "
                "(nothing is allocated or written)");
  cmd->add_flag("--profile", args->profile,
                "time every op kind (forward, backward) and the phases around them (AdamW, gradient norm, data, "
                "evaluation, probes, checkpoints); prints the shares at the end and writes profile.json");
  cmd->callback([args, stop_after] {
    // -1 stands for "not given" inside; given, it is refused like any other step below 1.
    if (stop_after->count() > 0 && args->stop_after < 1)
      fail("--stop-after {}: give the step to stop after, 1 or more", args->stop_after);
    train::RunConfig config;
    if (args->resume) {
      if (!args->sources.file.empty() || !args->sources.overrides.empty() || !args->sources.preset.empty())
        fail("--resume continues with the run's own config.json; drop --preset/--config/--set");
      config = load_run_config({.file = (fs::path(args->run) / "config.json").string()});
    } else {
      config = load_run_config(args->sources);
    }
    if (args->probes && config.train.probe_every == 0) config.train.probe_every = 50;
    const train::TrainOptions options{args->resume, args->stop_after, &std::cerr, args->profile};
    if (args->dry_run) return print_plan(config, train::training_needs(config, args->run, options));
    train::Trainer trainer(config, args->run, options);
    train::TrainSummary s = trainer.run();
    if (dist::world().rank() != 0) return;  // the ranks of a data-parallel run end together: one reports
    if (s.steps < config.train.steps) {
      std::cout << fmt::format("stopped at step {} in {:.1f}s; continue with: normlab train --run {} --resume\n",
                               s.steps, s.seconds, args->run);
      return;
    }
    std::cout << fmt::format("done: {} steps in {:.1f}s ({:.0f} tok/s)\n", s.steps, s.seconds, s.tokens_per_s)
              << fmt::format(
                     "validation loss {:.4f} nats/token vs the val split's unigram cross-entropy {:.4f} nats/token "
                     "({})\n",
                     s.val_loss, s.unigram_val_xent_nats,
                     s.val_loss < s.unigram_val_xent_nats ? "below: the model learned context" : "NOT below")
              << fmt::format("run directory: {}\n", args->run);
  });
}

// The fewest evaluation batches that show progress.
constexpr int kQuietBatches = 100;

namespace {

// --logits: the first evaluation batch's tokens, targets and logits (fp32; an encoder-decoder's source too) as one
// safetensors file, to compare with another implementation's forward pass.
void write_first_batch_logits(train::Run& run, int batches, const std::string& file, const std::string& run_dir) {
  model::Model& m = *run.model;
  train::Batch batch;
  run.loader->eval_batch(0, batches, batch);
  train::feed(m, batch);
  m.forward(false);
  const int64_t b = m.batch, t = m.seq, v = run.config.model.vocab_size;
  std::vector<float> rounded;  // an fp64 run's logits, rounded: the file holds fp32 (--logits' help)
  if (m.graph.float_type() == engine::DType::f64) {
    const double* l = m.graph.data<double>(m.logits);
    rounded.assign(l, l + b * t * v);
  }
  const float* logits = rounded.empty() ? m.graph.data<float>(m.logits) : rounded.data();
  std::vector<io::TensorToWrite> tensors = {{"tokens", io::Dtype::I32, {b, t}, batch.tokens.data()},
                                            {"targets", io::Dtype::I32, {b, t}, batch.targets.data()},
                                            {"logits", io::Dtype::F32, {b, t, v}, logits}};
  if (run.config.model.encoder_decoder()) {  // the encoder's input: the padded source and each row's length
    if (batch.source.size() != static_cast<size_t>(b * t) || batch.source_lengths.size() != static_cast<size_t>(b))
      fail("--logits: the batch's source holds {} ids and {} lengths, not {} x {} and {}", batch.source.size(),
           batch.source_lengths.size(), b, t, b);
    tensors.push_back({"source", io::Dtype::I32, {b, t}, batch.source.data()});
    tensors.push_back({"source_lengths", io::Dtype::I32, {b}, batch.source_lengths.data()});
  }
  io::write_safetensors(file, tensors, {{"run", run_dir}, {"step", std::to_string(run.step)}});
}

}  // namespace

void add_eval(CLI::App& app) {
  struct Args {
    std::string run;
    int batches = 32;
    std::string logits;
    model::InferenceOptions inference;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("eval", "validation loss of a run's checkpoint");
  add_inference_options(cmd, args->inference);
  cmd->add_option("-r,--run", args->run, "run directory")->required();
  CLI::Option* batches =
      cmd->add_option("--batches", args->batches,
                      "evaluation batches (at most the validation split's count; the default is 32 or that count "
                      "when it is smaller)")
          ->capture_default_str();
  cmd->add_option("--logits", args->logits,
                  "also write the first evaluation batch's tokens, targets and logits (fp32) to this safetensors file "
                  "(an encoder-decoder's also its source and source_lengths), e.g. to compare with the PyTorch module "
                  "of tools/to_torch.py");
  cmd->callback([args, batches] {
    if (args->batches < 1) fail("--batches {}: give the number of evaluation batches, 1 or more", args->batches);
    train::Run run = train::open_run(args->run, 0, {.gradients = false});
    apply_inference_options(*run.model, args->inference, args->run);
    const int available = run.loader->eval_batches_available();
    if (batches->count() == 0) args->batches = std::min(args->batches, available);
    if (args->batches > available)
      fail(
          "--batches {}: the validation split of {} holds {} batches of {} x {} tokens, and more would only repeat "
          "them: give at most {}",
          args->batches, run.config.data_dir, available, run.config.train.batch_size, run.config.train.seq_len,
          available);
    Progress progress("eval batches", args->batches, kQuietBatches);
    const train::Evaluation evaluation = train::evaluate(*run.model, *run.loader, args->batches, std::ref(progress));
    const double loss = evaluation.loss;
    if (!args->logits.empty()) write_first_batch_logits(run, args->batches, args->logits, args->run);
    if (!std::isfinite(loss))
      fail(
          "run {}: the validation loss of its checkpoint (step {}) is {}, not a number: the weights have diverged. "
          "Retrain it (normlab train --run {} with a lower train.lr, a longer train.warmup or train.clip > 0), or "
          "evaluate an earlier run",
          args->run, run.step, loss, args->run);
    std::cout << fmt::format(
        "step {}: validation loss {:.4f} nats per {} token (perplexity {:.2f}), accuracy {:.3f}; the val split's "
        "unigram cross-entropy {:.4f}\n",
        run.step, loss, run.config.model.encoder() ? "masked" : "predicted", std::exp(loss), evaluation.accuracy,
        run.data.unigram_val_xent_nats);
  });
}

}  // namespace normlab::cli
