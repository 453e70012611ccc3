#pragma once
// Each subcommand registers its options on the app and returns nothing; its action runs from
// CLI11's callback. Failures throw normlab::Error, which main() prints as one line.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "model/transformer.h"

namespace normlab::cli {

void add_prepare(CLI::App& app);
void add_train(CLI::App& app);
void add_eval(CLI::App& app);
void add_generate(CLI::App& app);
void add_translate(CLI::App& app);
void add_export(CLI::App& app);
void add_import(CLI::App& app);
void add_variants(CLI::App& app);
void add_presets(CLI::App& app);
void add_init_report(CLI::App& app);
void add_probe(CLI::App& app);
void add_study(CLI::App& app);
void add_sweep(CLI::App& app);
void add_serve(CLI::App& app);

// eval's and generate's inference-time approximations (model::InferenceOptions): --attn-top-k, --norm-sample.
void add_inference_options(CLI::App* cmd, model::InferenceOptions& options);
// One stderr line at each tenth of a long piece of work (a generate of many tokens, an eval of many batches), so
// that it shows it is alive; counted in work done, not time, so the lines are the same on any machine. Work below
// `quiet_below` units shows nothing.
class Progress {
 public:
  Progress(std::string what, int64_t total, int64_t quiet_below);
  void operator()(int64_t done);

 private:
  std::string what_;
  int64_t total_;
  bool shown_;
  int64_t tenth_ = 0;
};

// Sets them on a model of run `run`, refusing a --norm-sample that no norm of the model would use.
void apply_inference_options(model::Model& m, const model::InferenceOptions& options, const std::string& run);

}  // namespace normlab::cli
