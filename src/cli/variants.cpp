// normlab variants / normlab init-report: what each placement computes, and what its init realizes.
#include <fmt/core.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/run_config.h"
#include "io/corpus.h"
#include "model/init.h"
#include "model/norm.h"
#include "model/placement.h"
#include "model/presets.h"

namespace normlab::cli {

namespace fs = std::filesystem;

namespace {

void print_switches(std::span<const model::Switch> switches) {
  for (const model::Switch& s : switches)
    std::cout << fmt::format("      {} = {}: {}\n", s.name, s.default_json, s.help);
}

constexpr std::string_view kBaseInit =
    "the base init only (model.init; default GPT-2: every matrix and embedding N(0, 0.02), an untied head too "
    "(init.head = auto), gains 1, biases 0)";
constexpr std::string_view kBaseInitSource =
    "no rule in the paper; normlab's default is GPT-2's N(0, 0.02) (Radford et al. 2019, nanoGPT)";

void print_variant(const model::Placement& p) {
  std::cout << fmt::format("{}\n    paper:      {}\n    equations:  {}\n    final norm: {}\n", p.name, p.paper,
                           p.equations, p.final_norm ? "yes" : "no");
  if (p.defaults != "{}") std::cout << fmt::format("    defaults:   {}\n", Json::parse(p.defaults).dump());
  // Every placement states its default init and where it comes from.
  std::cout << fmt::format("    init:       {}\n", p.init_rule.empty() ? kBaseInit : p.init_rule);
  const std::string_view source = !p.init_source.empty() ? p.init_source
                                  : p.init_rule.empty()  ? kBaseInitSource
                                                         : "the paper above (see its notes for code-vs-paper choices)";
  std::cout << fmt::format("    init from:  {}\n", source);
  if (!p.notes.empty()) std::cout << fmt::format("    notes:      {}\n", p.notes);
  if (!p.switches.empty()) {
    std::cout << "    switches (model.options):\n";
    print_switches(p.switches);
  }
}

void print_norm_type(const model::NormType& t) {
  std::cout << fmt::format("  {:<14} {}\n", t.name, t.equation);
  if (!t.paper.empty()) std::cout << fmt::format("  {:<14} {}\n", "", t.paper);
  for (const model::NormParam& p : t.params) std::cout << fmt::format("  {:<14}   .{}: {}\n", "", p.suffix, p.init);
}

}  // namespace

void add_presets(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "presets",
      "list the real models' norm choices that --preset starts from (GPT-2, BERT, Llama, Qwen2, ..., the 2017 "
      "Transformer)");
  cmd->add_option("name", *name, "show one preset only");
  cmd->callback([name] {
    if (!name->empty()) model::find_preset(*name);  // an unknown name fails, listing the known ones
    for (const model::Preset& p : model::all_presets()) {
      if (!name->empty() && p.name != *name) continue;
      std::cout << fmt::format("{}\n    {}\n    source:  {}\n    model:   {}\n", p.name, p.title, p.source,
                               p.model.dump());
      if (!p.train.empty()) std::cout << fmt::format("    train:   {}\n", p.train.dump());
      for (const std::string& d : p.deviations) std::cout << fmt::format("    differs: {}\n", d);
      std::cout << "\n";
    }
    std::cout << "Train one with `normlab train --preset NAME --run DIR`; sizes and every other field can be "
                 "overridden (--set model.d_model=256 --set model.n_layers=8 ...).\n";
  });
}

void add_variants(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("variants",
                                     "list every normalization placement: paper, equations, defaults, "
                                     "init rule and switches");
  cmd->add_option("name", *name, "show one placement only");
  cmd->callback([name] {
    if (!name->empty()) return print_variant(model::find_placement(*name));
    for (const model::Placement* p : model::all_placements()) {
      print_variant(*p);
      std::cout << "\n";
    }
    std::cout << "switches every placement accepts (model.options):\n";
    print_switches(model::common_switches());
    std::cout << "\nnorm types (model.norm.type, e.g. --set model.norm.type=rmsnorm):\n";
    for (const model::NormType* t : model::all_norm_types()) print_norm_type(*t);
    std::cout << "\nbase init (model.init, before each placement's rule): scheme gpt2 N(0, std = 0.02) | scaled "
                 "(o, fc2 ÷ √(2L)) | xavier (init.xavier = uniform: U(±√(6/(fan_in+fan_out))), normal: "
                 "N(0, 2/(fan_in+fan_out))); embeddings N(0, embed_std = 0.02; 0 = d^-1/2); untied head "
                 "init.head = auto (as the scheme) | xavier_uniform | xavier_normal | normal (head_std; 0 = d^-1/2, "
                 "fairseq's output projection)\n";
    std::cout
        << "\nset a switch with e.g. --set model.placement=deepnorm --set model.options.deepnorm_init=torchscale\n";
  });
}

void add_init_report(CLI::App& app) {
  struct Args {
    ConfigSources sources;
    uint64_t seed = 1;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("init-report",
                                     "initialize a model from a config and print the realized std of "
                                     "every parameter, to check against the paper's init rule");
  add_config_options(cmd, args->sources);
  cmd->add_option("--seed", args->seed, "initialization seed")->capture_default_str();
  cmd->add_flag("--json", args->json, "print JSON lines instead of a table");
  cmd->callback([args] {
    train::RunConfig config = load_run_config(args->sources);
    // The vocabulary sets the untied head's std (√(2/(V+d)) under Xavier), so take the corpus's, as training does
    // (an encoder's has [MASK] besides).
    if (config.model.vocab_size == 0) {
      if (fs::exists(fs::path(config.data_dir) / "meta.json")) {
        config.model.vocab_size = io::load_tokens(config.data_dir).vocab_size + (config.model.encoder() ? 1 : 0);
      } else {
        config.model.vocab_size = 4096;
        std::cerr << fmt::format(
            "init-report: {} has no meta.json, so the vocabulary is taken as 4096 (prepare it, or set data.dir or "
            "model.vocab_size)\n",
            config.data_dir);
      }
    }
    auto m = model::build_model(config.model, 1, 2);
    model::initialize(*m, args->seed);
    const model::Placement& p = model::find_placement(config.model.placement);
    if (!args->json)
      std::cout << fmt::format("placement {} (L = {}, d = {}, V = {}, init.scheme = {}); rule: {}\n", p.name,
                               config.model.n_layers, config.model.d_model, config.model.vocab_size,
                               config.model.init.scheme, p.init_rule.empty() ? "base init only" : p.init_rule)
                << fmt::format("{:<36} {:<10} {:<12} {:>10} {:>10} {:>10}\n", "parameter", "role", "shape", "mean",
                               "std", "rms");
    for (const model::ParamStats& s : model::parameter_stats(*m)) {
      if (args->json)
        std::cout << Json{{"name", s.name}, {"role", s.role}, {"shape", s.shape},
                          {"mean", s.mean}, {"std", s.std},   {"rms", s.rms}}
                         .dump()
                  << "\n";
      else
        std::cout << fmt::format("{:<36} {:<10} {:<12} {:>10.5f} {:>10.5f} {:>10.5f}\n", s.name, s.role, s.shape,
                                 s.mean, s.std, s.rms);
    }
  });
}

}  // namespace normlab::cli
