// normlab variants / normlab init-report: what each placement computes, and what its init realizes.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/run_config.h"
#include "io/corpus.h"
#include "model/formula.h"
#include "model/formula_expr.h"
#include "model/gradient_check.h"
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

// A parameter's shape in the model's terms: [8] in the check's tiny model (d 8, d_ff 12, 2 heads) is [d].
std::string symbolic(const engine::Shape& shape, const model::ModelConfig& c) {
  std::vector<std::string> dims;
  for (int i = 0; i < shape.rank; ++i) {
    const int64_t n = shape[i];
    dims.push_back(n == c.d_model ? "d" : n == c.d_ff ? "d_ff" : n == c.n_heads ? "H" : std::to_string(n));
  }
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

// What a formula adds to the plain sub-layers (its norms, learned coefficients, the norms inside F, the final norm):
// the parameters of layer 0 and after the stack, beside the linear maps that every placement has.
void print_added_parameters(const model::Model& m) {
  std::cout << "parameters it adds (per layer, as layer 0 has them; the branches' linear maps aside):\n";
  int shown = 0;
  for (engine::TensorId id : m.graph.parameters()) {
    const engine::TensorSpec& p = m.graph.spec(id);
    const bool own =
        p.role == engine::Role::norm_gain || p.role == engine::Role::norm_bias || p.role == engine::Role::scalar;
    const bool where = p.name.starts_with("layers.0.") || p.name.starts_with("final_norm.") ||
                       p.name.starts_with("decoder.layers.0.cross.");
    if (!own || !where) continue;
    std::cout << fmt::format("  {:<36} {:<10} {:<10} starts at {:g}\n", p.name, symbolic(p.shape, m.config),
                             engine::role_name(p.role), p.init_value);
    ++shown;
  }
  if (shown == 0) std::cout << "  none\n";
}

// The longest expression shown above a mistake with a caret under it; a longer one is quoted only in the message.
constexpr size_t kPictureWidth = 200;

// The fp64 gradient check of the formula on a tiny model of `shape`: prints its line and adds each parameter whose
// gradient disagrees to `failed`. False when the formula states nothing for that shape (the line says why).
bool check_shape(const model::Formula& formula, const std::string& shape, std::vector<std::string>& failed) {
  Json section = model::gradient_check_section();
  section["placement"] = formula.json();
  section["shape"] = shape;
  if (shape == "encoder_decoder") section["encoder_layers"] = 3;
  model::ModelConfig config;
  try {
    config = model::read_model_config(section, "the check's model");
  } catch (const model::formula::FormulaError&) {
    throw;
  } catch (const Error& e) {
    std::cout << fmt::format("{}: not checked: {}\n", shape, e.what());
    return false;
  }
  auto m = model::gradient_check_model(config);
  if (shape == "decoder") print_added_parameters(*m);
  const std::vector<model::GradientComparison> checked = model::compare_gradients(*m);
  double worst = 0;
  std::string worst_name, zero;
  bool fails = false;
  for (const model::GradientComparison& c : checked) {
    if (c.zero()) {
      zero += (zero.empty() ? "" : ", ") + c.name;
      continue;
    }
    if (!c.agrees()) failed.push_back(fmt::format("{} {} (relative error {:.2g})", shape, c.name, c.relative()));
    fails |= !c.agrees();
    if (c.relative() >= worst) worst = c.relative(), worst_name = c.name;
  }
  std::cout << fmt::format(
      "gradient check, {} (L = {}{}, d = 8, fp64, central differences): {} parameters, largest relative error "
      "{:.2g} ({}): {}{}\n",
      shape, config.n_layers, config.encoder_decoder() ? ", encoder 3" : "", checked.size(), worst, worst_name,
      fails ? "FAIL" : "pass", zero.empty() ? "" : "; no gradient reaches " + zero);
  return true;
}

// `normlab variants check`: the formula as understood, what it adds, and an fp64 gradient check of a tiny model of
// every shape it states equations for.
void check_formula(const std::string& given) {
  // A file (with or without its '@'), else an expression: what is neither an existing file nor named *.json. Asked
  // without throwing: an expression longer than a file name may be (255 bytes) is no file, not an error.
  std::error_code no_file;
  const bool file = !given.starts_with('@') && (fs::is_regular_file(given, no_file) || given.ends_with(".json"));
  const std::string value = file ? fmt::format("@{}", given) : given;
  try {
    const auto formula = model::Formula::read(Json(value), "the formula");
    std::cout << fmt::format("formula {}{}\n", formula->name(),
                             value.starts_with('@') ? fmt::format(" ({})", value.substr(1)) : " (an expression)");
    for (const std::string& line : formula->describe()) std::cout << "  " << line << "\n";
    std::vector<std::string> failed;
    int checked = 0;
    for (const char* shape : {"decoder", "encoder", "encoder_decoder"}) checked += check_shape(*formula, shape, failed);
    // A check that checked nothing has not passed: each "not checked" line above says what the formula lacks.
    if (checked == 0)
      fail(
          "formula {}: no shape could be checked (decoder, encoder and encoder_decoder each say why above): fix "
          "what they name",
          formula->name());
    if (!failed.empty())
      fail("formula {}: the analytic gradient differs from finite differences: {}", formula->name(),
           fmt::join(failed, "; "));
  } catch (const model::formula::FormulaError& e) {
    // Where it is, as a picture, when the text fits a line; the one error line follows.
    if (e.text.size() <= kPictureWidth)
      std::cerr << fmt::format("{}:\n  {}\n  {}^\n", e.field, e.text, std::string(e.column - 1, ' '));
    throw;
  }
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
  auto formula = std::make_shared<std::string>();
  CLI::App* check = cmd->add_subcommand(
      "check",
      "check a placement written as a formula (docs/variants.md): print it as understood and what it adds, and run "
      "an fp64 gradient check on a tiny model of each shape");
  check->add_option("formula", *formula, "a formula file (my.json or @my.json), or an expression in quotes")
      ->required();
  check->callback([formula] { check_formula(*formula); });
  cmd->callback([name, check] {
    if (*check) return;
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
    const model::Placement& p = model::placement_of(config.model);
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
