// normlab study / normlab sweep: named experiments and user grids, each with a report.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "dist/comm.h"
#include "io/atomic_file.h"
#include "study/claim_file.h"
#include "study/findings.h"
#include "study/kit.h"
#include "study/ladder.h"
#include "study/preregistration.h"
#include "study/statistics.h"
#include "study/studies.h"
#include "study/sweep.h"

namespace normlab::cli {

namespace fs = std::filesystem;

namespace {

// The runner's options; returns --jobs, whose default (one run per core) is chosen after parsing (choose_jobs).
CLI::Option* add_runner_options(CLI::App* cmd, study::RunnerOptions& runner) {
  CLI::Option* jobs = cmd->add_option("-j,--jobs", runner.jobs,
                                      "runs at once (separate processes; per rank under mpirun); default one per core: "
                                      "--threads ÷ --ranks-per-run, each run on one thread");
  cmd->add_option("--threads", runner.threads, "cores shared by the runs (per rank under mpirun)")
      ->capture_default_str();
  cmd->add_option("--ranks-per-run", runner.ranks_per_run,
                  "processes per run: above 1 each run trains data-parallel under its own mpirun, on this host or "
                  "over a group of this job's ranks (docs/scaling.md)")
      ->capture_default_str();
  cmd->add_flag("--fresh", runner.fresh,
                "discard the runs stored in the output directory and run them all again (by default a finished run is "
                "reused when its request.json equals the plan's, and a different one stops the command)");
  return jobs;
}

// --jobs left out: one run per core (study::jobs_per_core). Small models use a second thread poorly, so runs side by
// side finish a grid sooner than one run at a time on every core.
void choose_jobs(const CLI::Option* jobs, study::RunnerOptions& runner) {
  if (jobs->count() == 0) runner.jobs = study::jobs_per_core(runner);
}

// This process's command line, as a shell would take it back.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), line, word;
  std::istringstream words(all);
  while (std::getline(words, word, '\0')) {
    const bool plain =
        !word.empty() &&
        word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
            std::string::npos;
    if (!line.empty()) line += ' ';
    if (plain) {
      line += word;
    } else {
      line += '\'';
      for (char c : word) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
      line += '\'';
    }
  }
  return line;
}

// Where `normlab study NAME` writes without --out: runs/study-NAME, with -quick or -large for those presets.
fs::path default_study_dir(std::string_view name, std::string_view preset = "") {
  return fs::path("runs") / fmt::format("study-{}{}{}", name, preset.empty() ? "" : "-", preset);
}

// The last verdict in a study's default folders (the default preset's, then --quick's and --large's), e.g.
// "reproduced, 2026-11-30 21:40 UTC (runs/study-x/report.html)".
std::string last_verdicts(std::string_view name) {
  std::vector<std::string> found;
  for (const std::string_view preset : {"", "quick", "large"}) {
    const fs::path dir = default_study_dir(name, preset);
    if (const auto e = study::read_report_entry(dir))
      found.push_back(fmt::format("{}{}, {} ({})", preset.empty() ? "" : fmt::format("--{}: ", preset), e->verdict,
                                  e->written, (dir / "report.html").string()));
  }
  if (found.empty()) return fmt::format("none yet in {}", default_study_dir(name).string());
  return fmt::format("{}", fmt::join(found, "; "));
}

// A built-in study by name, or a claim file given as @FILE (held by `claim` while the study runs).
const study::Study& study_named(const std::string& name, std::shared_ptr<const study::ClaimFile>& claim) {
  if (!name.starts_with('@')) return study::find_study(name);
  if (name.size() == 1) fail("study @: name the claim file after '@', e.g. normlab study @examples/claims/mine.json");
  claim = study::read_claim_file(name.substr(1));
  return study::study_of(*claim);
}

// Under mpirun rank 0 runs the command and hands its runs out; every other rank only runs them. Returns
// true on such a worker rank, after rank 0 released it.
bool served_as_worker() {
  if (dist::world().rank() == 0) return false;
  study::serve_runs();
  return true;
}

void print_study_list() {
  for (const study::Study* s : study::all_studies())
    std::cout << fmt::format("{}: {}\n    claim:  {}\n    source: {}\n    cost:   {}\n    last:   {}\n", s->name,
                             s->title, s->claim, s->source, s->cost, last_verdicts(s->name));
  std::cout << "Run one with `normlab study <name>` (add --quick for the small preset); the report's path is printed "
               "at the end.\n";
  if (fs::exists("runs/studies.html")) std::cout << "Every report with its verdict: runs/studies.html\n";
}

// results/README.md, and the copy of its table in the README beside results/ (when there is one).
void write_findings_index(const fs::path& results, bool check) {
  if (!fs::is_directory(results)) fail("study index: {} is not a folder (give the results folder)", results.string());
  const fs::path readme = fs::absolute(results).lexically_normal().parent_path() / "README.md";
  std::vector<std::pair<fs::path, std::string>> files = {{results / "README.md", study::findings_index(results)}};
  if (fs::exists(readme))
    files.emplace_back(readme, study::with_readme_findings(io::read_file(readme, "README"), results));
  for (const auto& [file, text] : files) {
    if (!check) {
      io::write_file_atomic(file, text);
      std::cout << "wrote " << file.string() << "\n";
      continue;
    }
    const std::string committed = fs::exists(file) ? io::read_file(file, "findings index") : "";
    if (committed != text)
      fail("{} is not what the reports under {} say; regenerate it with `normlab study index {}`", file.string(),
           results.string(), results.string());
    std::cout << file.string() << " matches the reports\n";
  }
}

// --ladder: the study once per rung, then the ladder's report beside the rungs' folders (default
// runs/study-NAME[-quick|-large]-ladder-AXIS); fails at the end, after the report, if a rung's runs failed.
// With --preregistration it runs nothing and prints each rung's pre-registration and hash, what the ladder freezes.
void climb_ladder(const study::Study& s, study::StudyOptions options, const study::RunnerOptions& runner,
                  const std::string& spec, const std::string& out, std::string_view preset, bool preregistration) {
  const std::string axis = spec.substr(0, spec.find('='));
  options.dir = out.empty() ? fs::path(default_study_dir(s.name, preset).string() + "-ladder-" + axis) : fs::path(out);
  options.command_line = command_line();
  const study::Ladder ladder = study::plan_ladder(s, options, spec);
  if (preregistration) return void(std::cout << study::ladder_preregistration_text(s, options, ladder));
  const study::LadderResult result = study::run_ladder(s, options, ladder, runner);
  study::release_workers();
  std::vector<std::string> failed;
  for (size_t i = 0; i < result.rungs.size(); ++i) {
    std::cout << fmt::format("rung {}={}: {} ({})\n", axis, ladder.rungs[i].value, result.rungs[i].verdict,
                             result.rungs[i].report.string());
    if (!result.rungs[i].failures.empty()) failed.push_back(ladder.rungs[i].dir.string());
  }
  for (const std::string& line : result.trends) std::cout << "  " << line << "\n";
  std::cout << fmt::format("ladder: {}\n", result.html.string());
  if (!failed.empty())
    fail(
        "--ladder {}: runs failed in {} (listed in each rung's report.md); fix the cause and rerun the same command, "
        "the finished runs are reused",
        spec, fmt::join(failed, ", "));
}

struct StudyArgs {
  std::string name, out, index_dir;
  bool help = false, large = false, check = false, preregistration = false;
  std::string seeds, ladder;
  int max_seeds = study::SeedSchedule::kDefaultCap;
  study::StudyOptions options;
  study::RunnerOptions runner;
  CLI::Option* jobs = nullptr;
};

void add_study_options(CLI::App* cmd, StudyArgs& a) {
  cmd->add_flag("-h,--help", a.help, "this help; with a study name, that study's claim, axes and examples");
  cmd->add_option("name", a.name,
                  "study name, @FILE (your own claim as a file: docs/studies.md, \"Your own claim\"), `list`, "
                  "`statistics` (what a sub-claim can read from a run), or `index` (writes DIR/README.md, the findings "
                  "table of the reports kept under DIR, default results)");
  cmd->add_option("dir", a.index_dir, "with `index`: the results folder (default results)");
  cmd->add_flag("--check", a.check,
                "with `index`: write nothing, fail if DIR/README.md differs from what the reports say");
  cmd->add_flag("--quick", a.options.quick, "the small preset (a few minutes)");
  cmd->add_flag("--large", a.large,
                "the cluster-sized preset: d 256, T 128, 12-48 layers, thousands of steps (`normlab study NAME --help` "
                "shows its settings; docs/studies.md its core-hours)");
  cmd->add_option("--seeds", a.seeds,
                  "the seeds every configuration runs with: auto (the default: 3 seeds, then 2 more at a time while a "
                  "sub-claim is unclear, up to --max-seeds), auto:101 (the same from seed 101), or fixed: a count N "
                  "(seeds 1..N), a list 101,102,103 or a range 101-103 (--quick: 1 seed, --large: 3)");
  cmd->add_option("--max-seeds", a.max_seeds, "the cap of --seeds auto")->capture_default_str();
  cmd->add_flag("--judge-only", a.options.judge_only,
                "judge the runs stored in --out again with this build's rule, running nothing (a run that is not "
                "there counts as failed): kept results judged again after a change to the study wing");
  cmd->add_flag(
      "--preregistration", a.preregistration,
      "print the study's pre-registration (arms, sub-claims, rule, seed rule, preset) and its hash, run "
      "nothing; commit it with \"frozen NAME HASH\" before running unseen seeds (1001 on); with --ladder, each "
      "rung's (one \"frozen NAME HASH\" per rung)");
  cmd->add_option("-s,--set", a.options.overrides, "override a field of every run, e.g. --set train.lr=3e-4");
  cmd->add_option("-g,--grid", a.options.grid,
                  "replace the values of one of the study's axes, e.g. --grid model.n_layers=8,16,32 (repeatable; "
                  "`normlab study NAME --help` lists its axes)");
  cmd->add_option("--ladder", a.ladder,
                  "run the preset once per rung of one scale axis, AXIS=V1,V2,V3 (at least 3; train.steps, "
                  "model.n_layers or model.d_model, whose heads, d_ff and lr follow it), each rung a study in "
                  "OUT/rung-AXIS-V, with the same fixed seeds (default 1,2,3), and report each sub-claim's trend in "
                  "OUT/ladder.html (default OUT runs/study-<name>[-quick|-large]-ladder-AXIS; docs/studies.md)");
  cmd->add_option("--claims", a.options.claims,
                  "with --ladder: follow only these sub-claims, e.g. --claims D or --claims A,C; only the arms they "
                  "read run at each rung (the others are shown as not followed)")
      ->delimiter(',');
  cmd->add_option("-o,--out", a.out, "study directory (default runs/study-<name>[-quick|-large])");
  a.jobs = add_runner_options(cmd, a.runner);
}

// The study run to its verdict and printed; fails after the report when the study is incomplete.
void run_and_print(const study::Study& s, StudyArgs& a, std::string_view preset) {
  a.options.dir = a.out.empty() ? default_study_dir(s.name, preset) : fs::path(a.out);
  a.options.command_line = command_line();
  const study::StudyResult result = study::run_study(s, a.options, a.runner);
  study::release_workers();
  std::cout << fmt::format("verdict: {}\n", result.verdict);
  for (const study::SubClaim& c : result.claims)
    std::cout << fmt::format("  {}. {} — {}: {}, interval {}, threshold {}\n", c.id, c.outcome(), c.statistic,
                             c.values.show(), c.interval(), c.threshold());
  std::cout << fmt::format("headline: {}\nreport: {}\nsummary: {}\nevery report: {}\n", result.headline,
                           result.report.string(), (a.options.dir / "report.md").string(), result.index.string());
  if (result.verdict != "incomplete") return;
  for (const std::string& f : result.failures) std::cerr << "study: failed run " << f << "\n";
  if (!result.failures.empty())
    fail(
        "study {} is incomplete: {} run(s) failed (listed above and in {}); nothing was decided. Fix the cause and "
        "rerun the same command: the finished runs are reused",
        s.name, result.failures.size(), (a.options.dir / "report.md").string());
  fail(
      "study {} is incomplete: a sub-claim lacks a number it needs (a run's files miss a record; see \"cannot decide\" "
      "in {})",
      s.name, (a.options.dir / "report.md").string());
}

void dispatch_study(StudyArgs& a, const CLI::App& cmd) {
  if (a.help) {
    if (a.name.empty() || a.name == "list") return void(std::cout << cmd.help());
    std::shared_ptr<const study::ClaimFile> claim;
    std::cout << study::study_help(study_named(a.name, claim)) << "\n" << cmd.help();
    return;
  }
  if (a.name.empty()) fail("study: a study name is required (`normlab study list` shows them)");
  if (a.name == "list") return print_study_list();
  if (a.name == "statistics") return void(std::cout << study::statistics_help());
  choose_jobs(a.jobs, a.runner);
  study::check_runner_options(a.runner);
  if (a.name == "index") return write_findings_index(a.index_dir.empty() ? "results" : a.index_dir, a.check);
  if (!a.index_dir.empty()) fail("study {}: unexpected argument '{}'", a.name, a.index_dir);
  std::shared_ptr<const study::ClaimFile> claim;
  const study::Study& s = study_named(a.name, claim);
  if (served_as_worker()) return;
  if (!a.options.claims.empty() && a.ladder.empty())
    fail(
        "--claims {}: a study at its preset judges every sub-claim it pre-registered; --claims follows some of them up "
        "a ladder, so add --ladder AXIS=V1,V2,V3 or drop --claims",
        fmt::join(a.options.claims, ","));
  if (a.large) study::use_large_preset(s, a.options);
  const bool default_preset = !a.options.quick && !a.large;
  if (a.ladder.empty())
    study::choose_seeds(a.options, a.seeds.empty() && default_preset ? std::string(s.default_seeds) : a.seeds,
                        a.max_seeds);
  else study::choose_ladder_seeds(a.options, a.seeds);
  const std::string_view preset = a.options.quick ? "quick" : a.large ? "large" : "";
  if (!a.ladder.empty()) return climb_ladder(s, a.options, a.runner, a.ladder, a.out, preset, a.preregistration);
  if (a.preregistration) return void(std::cout << study::preregistration_text(s, a.options));
  run_and_print(s, a, preset);
}

}  // namespace

void add_study(CLI::App& app) {
  auto args = std::make_shared<StudyArgs>();
  CLI::App* cmd = app.add_subcommand("study", "run a named experiment and write its report (`normlab study list`)");
  // `normlab study NAME --help` describes that study (its axes, presets, examples), so the help flag is
  // read in the callback rather than by CLI11, which would print the generic help.
  cmd->set_help_flag();
  add_study_options(cmd, *args);
  cmd->callback([args, cmd] { dispatch_study(*args, *cmd); });
}

void add_sweep(CLI::App& app) {
  struct Args {
    std::string file, out;
    study::RunnerOptions runner;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("sweep",
                                     "run a user-defined grid: {\"base\": {...}, \"grid\": {\"model.placement\": "
                                     "[\"post\", \"pre\"], \"train.lr\": [1e-3, 3e-4]}, \"seeds\": 2}");
  cmd->add_option("file", args->file, "sweep file (JSON)")->required();
  cmd->add_option("-o,--out", args->out, "sweep directory (default runs/sweep-<file name>)");
  CLI::Option* jobs = add_runner_options(cmd, args->runner);
  cmd->callback([args, jobs] {
    choose_jobs(jobs, args->runner);
    study::check_runner_options(args->runner);
    if (served_as_worker()) return;
    const Json doc = parse_config_json(io::read_file(args->file, "sweep file"), args->file);
    const fs::path dir =
        args->out.empty() ? fs::path("runs") / ("sweep-" + fs::path(args->file).stem().string()) : fs::path(args->out);
    const auto outcomes = study::run_grid(dir, study::expand_sweep(doc, args->file), args->runner);
    study::release_workers();
    study::write_summary_csv(dir / "summary.csv", outcomes);
    // No verdict: a sweep tests no claim, so its report has no verdict section.
    study::Report r{.name = "sweep",
                    .title = "Sweep " + args->file,
                    .claim = "(a user grid: no claim)",
                    .source = args->file,
                    .setup = doc.at("grid").dump(),
                    .provenance = {"normlab: " + study::source_version() + " (the commit the binary was built from)",
                                   study::runs_made_by(outcomes)}};
    study::Chart curves{"training loss", "step", "loss"};
    for (const auto& o : outcomes) {
      curves.series.push_back(study::loss_series(o.request.id, &o));
      r.run_dirs.push_back(fs::relative(o.dir, dir).string());
    }
    r.charts.push_back(curves);
    r.tables.push_back(study::outcome_table("Runs", outcomes));
    const fs::path html = study::write_report(dir, r);
    std::cout << fmt::format("report: {}\nsummary: {}\nevery report: {}\n", html.string(),
                             (dir / "summary.csv").string(), study::write_report_index(dir).string());
    study::require_no_failed_runs(outcomes, dir / "summary.csv");
  });
}

}  // namespace normlab::cli
