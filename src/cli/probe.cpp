// normlab probe: analyses of a checkpoint or of a freshly initialized config.
#include <fmt/core.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "analysis/analyses.h"
#include "cli/commands.h"
#include "cli/run_config.h"
#include "io/atomic_file.h"
#include "model/init.h"
#include "train/checkpoint.h"
#include "train/run.h"

namespace normlab::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOutput =
    "Output: a table per analysis on stdout, and analysis.jsonl (one record per analysis, columns as arrays)\n"
    "plus analysis.csv (long form: analysis,name,layer,head,quantity,value) in --out; docs/probes.md.";

void print_table(const std::string& title, const Json& columns) {
  std::cout << "\n" << title << "\n";
  std::vector<std::string> keys;
  size_t rows = 0;
  for (const auto& [k, v] : columns.items())
    if (v.is_array()) keys.push_back(k), rows = v.size();
    else std::cout << fmt::format("  {} = {}\n", k, v.dump());
  if (keys.empty()) return;
  for (const auto& k : keys) std::cout << (k == "name" ? fmt::format("{:<34}", k) : fmt::format("{:>18}", k));
  std::cout << "\n";
  for (size_t r = 0; r < rows; ++r) {
    for (const auto& k : keys) {
      const Json& v = columns[k][r];
      if (k == "name") std::cout << fmt::format("{:<34}", v.get<std::string>());
      else if (v.is_number_float()) std::cout << fmt::format("{:>18.6g}", v.get<double>());
      else std::cout << fmt::format("{:>18}", v.is_string() ? v.get<std::string>() : v.dump());
    }
    std::cout << "\n";
  }
}

std::string csv_rows(const std::string& analysis, const Json& columns) {
  std::string out;
  size_t rows = 0;
  for (const auto& [k, v] : columns.items())
    if (v.is_array()) rows = v.size();
  auto field = [&](const char* key, size_t r) {
    if (!columns.contains(key) || !columns[key].is_array()) return std::string();
    const Json& v = columns[key][r];
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  for (const auto& [k, v] : columns.items()) {
    if (k == "name" || k == "layer" || k == "head") continue;
    if (!v.is_array()) {
      out += fmt::format("{},,,,{},{}\n", analysis, k, v.dump());
      continue;
    }
    for (size_t r = 0; r < rows; ++r)
      out += fmt::format("{},{},{},{},{},{}\n", analysis, field("name", r), field("layer", r), field("head", r), k,
                         v[r].dump());
  }
  return out;
}

}  // namespace

void add_probe(CLI::App& app) {
  struct Args {
    ConfigSources sources;
    std::string run, out, analyses = "grad-init,one-step,angular,layer-drop,attention-entropy";
    analysis::AnalysisSettings settings;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("probe", "analyses of a checkpoint (--run) or of a freshly initialized config");
  cmd->footer(analysis::analyses_help() + kOutput);
  add_config_options(cmd, args->sources);
  cmd->add_option("-r,--run", args->run, "analyse this run's checkpoint (else: the config, freshly initialized)");
  cmd->add_option("-a,--analysis", args->analyses, "comma-separated list")->capture_default_str();
  cmd->add_option("-o,--out", args->out, "output directory (default: the run directory, or runs/probe-<placement>)");
  cmd->add_option("--batches", args->settings.batches, "batches per measurement")->capture_default_str();
  cmd->add_option("--seeds", args->settings.seeds, "initializations averaged by grad-init and stream-init")
      ->capture_default_str();
  cmd->add_option("--lr", args->settings.lr, "step size of one-step")->capture_default_str();
  cmd->add_option("--span", args->settings.span, "n of the angular distance between layers l and l+n")
      ->capture_default_str();
  cmd->callback([args] {
    const train::MemoryNeeds needs = analysis::memory_needs(args->analyses);  // refuses an unknown name first
    train::Run run = args->run.empty() ? train::build_run(load_run_config(args->sources), 0, needs)
                                       : train::open_run(args->run, 0, needs);
    if (args->run.empty()) model::initialize(*run.model, run.config.train.seed);
    const train::RunConfig& config = run.config;
    model::Model& m = *run.model;
    const train::Loader& loader = *run.loader;
    const fs::path out = !args->out.empty()   ? fs::path(args->out)
                         : !args->run.empty() ? fs::path(args->run)
                                              : fs::path("runs") / ("probe-" + config.model.placement);
    fs::create_directories(out);
    std::string jsonl, csv = "analysis,name,layer,head,quantity,value\n";
    std::cout << fmt::format("probing {} ({}, L = {}, d = {})\n", args->run.empty() ? "a fresh init" : args->run,
                             config.model.placement, config.model.n_layers, config.model.d_model);
    for (const analysis::Analysis* a : analysis::parse_analyses(args->analyses)) {
      const std::string name(a->name);
      const Json result = a->run({m, loader, config, args->settings});
      if (a->moves_weights && !args->run.empty())  // restore the weights it moved
        train::load_checkpoint(fs::path(args->run) / train::kCheckpointFile, m, nullptr);
      else if (a->moves_weights) model::initialize(m, config.train.seed);
      print_table(name, result);
      jsonl += Json{{"analysis", name}, {"result", result}}.dump() + "\n";
      csv += csv_rows(name, result);
    }
    io::write_file_atomic(out / "analysis.jsonl", jsonl);
    io::write_file_atomic(out / "analysis.csv", csv);
    std::cout << fmt::format("\nwrote {} and {}\n", (out / "analysis.jsonl").string(), (out / "analysis.csv").string());
  });
}

}  // namespace normlab::cli
