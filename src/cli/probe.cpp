// normlab probe: analyses of a checkpoint or of a freshly initialized config.
#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "analysis/analyses.h"
#include "cli/commands.h"
#include "cli/probe_report.h"
#include "cli/run_config.h"
#include "common/error.h"
#include "io/atomic_file.h"
#include "model/init.h"
#include "train/checkpoint.h"
#include "train/hf_tokens.h"
#include "train/run.h"

namespace normlab::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOutput =
    "Output: a table per analysis on stdout, and analysis.jsonl (one record per analysis, columns as arrays)\n"
    "plus analysis.csv (long form: analysis,name,layer,head,quantity,value) in --out; docs/probes.md. The same as a\n"
    "report with a chart of each quantity by layer in --out/probe-report (report.html; normlab serve lists it).";

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

// A progress line on stderr for an analysis of many steps (batches, layers): done of total, the time so far and the
// time left at the pace so far. At most one line a second; rewritten in place on a terminal.
class ProgressLine {
 public:
  explicit ProgressLine(std::string name) : name_(std::move(name)) {}
  void operator()(int done, int total) {
    const Clock::time_point now = Clock::now();
    if (total < 2 || (done < total && now - last_ < std::chrono::seconds(1))) return;
    last_ = now;
    const double spent = std::chrono::duration<double>(now - start_).count();
    const bool tty = isatty(STDERR_FILENO) != 0;
    std::cerr << fmt::format("{}  {}: {} of {} steps, {:.0f} s, about {:.0f} s left{}", tty ? "\r" : "", name_, done,
                             total, spent, spent / done * (total - done), tty && done < total ? "" : "\n")
              << std::flush;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string name_;
  Clock::time_point start_ = Clock::now(), last_ = start_;
};

// The tokens the analyses read instead of the validation split: a text through the run's own tokenizer, or ids.
struct Reading {
  std::vector<int32_t> ids;
  std::unique_ptr<train::Loader> loader;
  std::string about;  // for people: how many tokens of what
};

std::vector<int32_t> text_ids(const train::Run& run, const std::optional<train::RunTokenizer>& tokenizer,
                              const std::string& text, const std::string& token_ids) {
  if (!text.empty() && !token_ids.empty()) fail("--text and --token-ids both give the tokens to read: give one");
  if (!token_ids.empty()) return train::read_token_ids(token_ids, run.config.model.vocab_size);
  if (!tokenizer)
    fail(
        "--text: the run's token data {} has no tokenizer (no tokenizer.model, nor GPT-2's vocab.json and merges.txt), "
        "so normlab cannot read text for it: give the text's ids, made by the model's own tokenizer, with --token-ids "
        "FILE, or import the checkpoint again with --text so that its tokenizer is kept",
        run.config.data_dir);
  return tokenizer->encode_lines(text);
}

// The reading of --text or --token-ids (nullopt with neither): every window of the run's train.seq_len once, unless
// --batches says how many.
std::optional<Reading> text_reading(const train::Run& run, const std::optional<train::RunTokenizer>& tokenizer,
                                    const std::string& text, const std::string& token_ids) {
  if (text.empty() && token_ids.empty()) return std::nullopt;
  Reading r{text_ids(run, tokenizer, text, token_ids), nullptr, ""};
  const std::string& file = text.empty() ? token_ids : text;
  const int seq = run.config.train.seq_len;
  if (r.ids.size() <= static_cast<size_t>(seq))
    fail("{} gives {} tokens, but the analyses read windows of train.seq_len + 1 = {} tokens: give a longer text", file,
         r.ids.size(), seq + 1);
  r.loader = std::make_unique<train::Loader>(r.ids, r.ids, run.model->batch, seq, run.config.train.seed, train::Shard{},
                                             train::objective_of(run.config, run.data));
  r.about = fmt::format("{} tokens of {}{}", r.ids.size(), file,
                        text.empty() ? "" : " (through the run's " + tokenizer->kind() + " tokenizer)");
  return r;
}

}  // namespace

namespace {

struct ProbeArgs {
  ConfigSources sources;
  std::string run, out, analyses = "grad-init,one-step,angular,layer-drop,attention-entropy", text, token_ids;
  analysis::AnalysisSettings settings;
  bool batches_given = false;
  bool report = true;
};

// The command line that reproduces the probe, for its report.
std::string command_of(const ProbeArgs& a) {
  std::string cmd = "normlab probe " + (a.run.empty() ? std::string("--config ...") : "--run " + a.run);
  cmd += " --analysis " + a.analyses + fmt::format(" --batches {}", a.settings.batches);
  if (!a.text.empty()) cmd += " --text " + a.text;
  if (!a.token_ids.empty()) cmd += " --token-ids " + a.token_ids;
  return cmd;
}

// Runs the analyses of `a` on the opened run, printing each table, and writes analysis.jsonl, analysis.csv and the
// report into `out`.
void run_analyses(ProbeArgs& a, train::Run& run, const fs::path& out) {
  const std::optional<train::RunTokenizer> tokenizer = train::RunTokenizer::find(run.config.data_dir, run.data);
  const std::optional<Reading> reading = text_reading(run, tokenizer, a.text, a.token_ids);
  const train::Loader& loader = reading ? *reading->loader : *run.loader;
  if (reading && !a.batches_given) a.settings.batches = loader.eval_batches_available();
  if (tokenizer) a.settings.token_text = [&](int32_t id) { return tokenizer->piece(id); };
  const model::ModelConfig& c = run.config.model;
  ProbeReport report{
      a.run.empty() ? "a fresh init of " + std::string(c.placement.name()) : a.run,
      fmt::format("{}, {} layers, d_model {}, vocabulary {}; {}, {} batch{} of {} x {} tokens", c.placement, c.n_layers,
                  c.d_model, c.vocab_size, reading ? reading->about : "the run's validation split", a.settings.batches,
                  a.settings.batches == 1 ? "" : "es", run.model->batch, run.config.train.seq_len),
      command_of(a),
      a.run.empty() ? "" : fs::relative(a.run, out / "probe-report").generic_string(),
      {}};
  std::cout << fmt::format("probing {} ({})\n", report.subject, report.setup);
  std::string jsonl, csv = "analysis,name,layer,head,quantity,value\n";
  for (const analysis::Analysis* an : analysis::parse_analyses(a.analyses)) {
    const std::string name(an->name);
    a.settings.progress = ProgressLine(name);
    const Json result = an->run({*run.model, loader, run.config, a.settings});
    if (an->moves_weights && !a.run.empty())  // restore the weights it moved
      train::load_checkpoint(fs::path(a.run) / train::kCheckpointFile, *run.model, nullptr);
    else if (an->moves_weights) model::initialize(*run.model, run.config.train.seed);
    print_table(name, result);
    jsonl += Json{{"analysis", name}, {"result", result}}.dump() + "\n";
    csv += csv_rows(name, result);
    report.results.emplace_back(name, result);
  }
  io::write_file_atomic(out / "analysis.jsonl", jsonl);
  io::write_file_atomic(out / "analysis.csv", csv);
  const std::string html = a.report ? ", " + write_probe_report(out / "probe-report", report).string() : "";
  std::cout << fmt::format("\nwrote {}, {}{}\n", (out / "analysis.jsonl").string(), (out / "analysis.csv").string(),
                           html);
}

}  // namespace

void add_probe(CLI::App& app) {
  auto args = std::make_shared<ProbeArgs>();
  CLI::App* cmd = app.add_subcommand("probe", "analyses of a checkpoint (--run) or of a freshly initialized config");
  cmd->footer(analysis::analyses_help() + kOutput);
  add_config_options(cmd, args->sources);
  cmd->add_option("-r,--run", args->run, "analyse this run's checkpoint (else: the config, freshly initialized)");
  cmd->add_option("-a,--analysis", args->analyses, "comma-separated list")->capture_default_str();
  cmd->add_option("-o,--out", args->out, "output directory (default: the run directory, or runs/probe-<placement>)");
  cmd->add_option("--batches", args->settings.batches,
                  "batches per measurement (with --text or --token-ids: every window of the text once)")
      ->capture_default_str();
  cmd->add_option("--seeds", args->settings.seeds, "initializations averaged by grad-init and stream-init")
      ->capture_default_str();
  cmd->add_option("--lr", args->settings.lr, "step size of one-step")->capture_default_str();
  cmd->add_option("--span", args->settings.span, "n of the angular distance between layers l and l+n")
      ->capture_default_str();
  cmd->add_option("--text", args->text,
                  "read this text file instead of the validation split, through the run's own tokenizer (its token "
                  "data's tokenizer.model, or GPT-2's vocab.json and merges.txt that import --text keeps there)");
  cmd->add_option("--token-ids", args->token_ids,
                  "read these white-space-separated token ids instead of the validation split (any tokenizer)");
  cmd->add_flag("!--no-report", args->report,
                "leave out probe-report/ (a study's runs, whose charts its own report draws: about 210 KB each)");
  cmd->callback([args, cmd] {
    args->batches_given = cmd->count("--batches") > 0;
    const train::MemoryNeeds needs = analysis::memory_needs(args->analyses);  // refuses an unknown name first
    // With tokens of its own the probe needs no loader over the run's data, whose splits may be too short for one.
    const bool loader = args->text.empty() && args->token_ids.empty();
    train::Run run = args->run.empty() ? train::build_run(load_run_config(args->sources), 0, needs, loader)
                                       : train::open_run(args->run, 0, needs, loader);
    if (args->run.empty()) model::initialize(*run.model, run.config.train.seed);
    const fs::path out = !args->out.empty() ? fs::path(args->out)
                         : !args->run.empty()
                             ? fs::path(args->run)
                             : fs::path("runs") / ("probe-" + std::string(run.config.model.placement.name()));
    fs::create_directories(out);
    run_analyses(*args, run, out);
  });
}

}  // namespace normlab::cli
