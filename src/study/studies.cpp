#include "study/studies.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>

#include "common/error.h"
#include "study/catalog.h"
#include "study/kit.h"

namespace normlab::study {

namespace fs = std::filesystem;

namespace {
const std::array kStudies = {
    &kWhyPreLn,      &kGradByDepth,     &kStreamAtInit, &kWarmupGrid,     &kModelUpdate,        &kOneStep,
    &kDepthVariance, &kLayerImportance, &kGradBalance,  &kRmsEquivalence, &kMassiveActivations, &kDytAlpha,
    &kLeaderboard,
};
}  // namespace

std::span<const Study* const> all_studies() { return kStudies; }

const Study& find_study(std::string_view name) {
  for (const Study* s : kStudies)
    if (s->name == name) return *s;
  std::string list;
  for (const Study* s : kStudies) list += (list.empty() ? "" : ", ") + std::string(s->name);
  fail("unknown study '{}' (known: {}; `normlab study list` describes each)", name, list);
}

std::vector<int> parse_seeds(const std::string& text) {
  const auto bad = [&](std::string_view why) -> std::vector<int> {
    fail("--seeds {}: {} (expected a count N for seeds 1..N, a list like 101,102,103, or a range like 101-103)", text,
         why);
  };
  const auto number = [&](std::string_view part) -> int {
    if (part.empty() || part.size() > 9 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      bad(fmt::format("'{}' is not a positive whole number", part));
    const int v = std::stoi(std::string(part));
    if (v <= 0) bad("seeds start at 1");
    return v;
  };
  std::vector<int> seeds;
  if (text.find(',') != std::string::npos) {
    size_t start = 0;
    while (true) {
      const size_t comma = text.find(',', start);
      seeds.push_back(number(std::string_view(text).substr(start, comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if (const size_t dash = text.find('-'); dash != std::string::npos) {
    const int lo = number(std::string_view(text).substr(0, dash)), hi = number(std::string_view(text).substr(dash + 1));
    if (hi < lo) bad("the range ends before it starts");
    if (hi - lo >= 1000) bad("more than 1000 seeds");
    for (int s = lo; s <= hi; ++s) seeds.push_back(s);
  } else {
    const int n = number(text);
    if (n > 1000) bad("more than 1000 seeds");
    for (int s = 1; s <= n; ++s) seeds.push_back(s);
  }
  std::vector<int> sorted = seeds;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) bad("a seed is listed twice");
  return seeds;
}

std::string describe_seeds(const std::vector<int>& seeds) {
  bool consecutive = seeds.size() > 1;
  for (size_t i = 1; i < seeds.size(); ++i) consecutive = consecutive && seeds[i] == seeds[i - 1] + 1;
  if (consecutive) return fmt::format("{}–{}", seeds.front(), seeds.back());
  return fmt::format("{}", fmt::join(seeds, ", "));
}

namespace {

// An override must name a field of the resolved config; model.options holds a variant's switches,
// which the variant checks itself.
void check_override_key(const Json& fields, const std::string& assignment) {
  const std::string key = assignment.substr(0, assignment.find('='));
  if (key.starts_with("model.options.")) return;
  std::string pointer = "/" + key;
  std::replace(pointer.begin(), pointer.end(), '.', '/');
  if (fields.contains(Json::json_pointer(pointer))) return;
  const size_t dot = key.rfind('.');
  const std::string section = dot == std::string::npos ? "" : key.substr(0, dot);
  std::string parent = "/" + section;
  std::replace(parent.begin(), parent.end(), '.', '/');
  const Json* keys = section.empty()                               ? &fields
                     : fields.contains(Json::json_pointer(parent)) ? &fields.at(Json::json_pointer(parent))
                                                                   : &fields;
  std::vector<std::string> known;
  for (const auto& [k, v] : keys->items()) known.push_back((keys == &fields ? "" : section + ".") + k);
  fail("--set {}: {} is not a run-config field (known here: {}); nothing was run", assignment, key,
       fmt::join(known, ", "));
}

// The commit of the source tree the binary sits in (git describe), if git and the tree are there.
std::string source_version() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "unknown";
  std::string command = "git -C '" + exe.parent_path().string() + "' describe --always --dirty --tags 2>/dev/null";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[256];
    while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
    if (pclose(pipe) != 0) out.clear();
  }
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::vector<std::string> provenance(const StudyOptions& o, const RunnerOptions& runner,
                                    const std::vector<RunOutcome>& runs) {
  std::vector<std::string> lines = {
      "command: " + (o.command_line.empty() ? std::string("(not recorded)") : o.command_line),
      fmt::format("overrides (--set, applied to every run): {}",
                  o.overrides.empty() ? "none" : fmt::format("{}", fmt::join(o.overrides, " "))),
      "normlab: " + source_version() + " (git describe, at report time, of the source tree holding the binary)",
  };
  std::set<std::string> corpora;
  for (const RunOutcome& r : runs) {
    const std::string dir = r.config["data"]["dir"].get<std::string>();
    if (corpora.insert(dir).second)
      lines.push_back(fmt::format("corpus: {} (meta.json fnv1a64 {})", dir, corpus_checksum(dir)));
  }
  const int jobs = std::max(1, runner.jobs);
  lines.push_back(fmt::format("threads: {} cores, {} run(s) at once, {} thread(s) each", runner.threads, jobs,
                              std::max(1, runner.threads / jobs)));
  lines.push_back(fmt::format("seeds: {} ({} per configuration)", describe_seeds(o.seeds), o.seeds.size()));
  lines.push_back(
      "the same command with the same --out reuses every finished run whose request.json equals the plan's; "
      "--fresh runs them all again");
  return lines;
}

}  // namespace

int checkpoint_interval(int steps) { return std::clamp(steps / 4, 1, 100); }

std::vector<RunRequest> plan_study(const Study& study, StudyOptions& options) {
  if (options.seeds.empty())
    for (int seed = 1; seed <= (options.quick ? 1 : study.default_seeds); ++seed) options.seeds.push_back(seed);
  std::vector<RunRequest> requests = study.plan(options);
  if (!requests.empty()) {
    const Json fields = resolve_config(requests.front().config, fmt::format("study {}", study.name));
    for (const auto& o : options.overrides) check_override_key(fields, o);
  }
  const bool own_interval = std::any_of(options.overrides.begin(), options.overrides.end(),
                                        [](const std::string& o) { return o.starts_with("train.checkpoint_every="); });
  for (RunRequest& r : requests) {
    for (const auto& o : options.overrides) apply_override(r.config, o);
    try {
      const Json resolved = resolve_config(r.config, "config");
      // After the overrides, so that --set train.steps=N moves the checkpoints with the run's length.
      if (r.kind == "train" && !own_interval)
        r.config["train"]["checkpoint_every"] = checkpoint_interval(resolved["train"]["steps"].get<int>());
    } catch (const Error& e) {
      fail("--set {}: {} (run {}); nothing was run", fmt::join(options.overrides, " --set "), e.what(), r.id);
    }
  }
  return requests;
}

Report judge_study(const Study& study, const StudyOptions& options, const std::vector<RunOutcome>& outcomes) {
  Report report = study.judge(options, outcomes);
  report.name = study.name, report.title = study.title, report.claim = study.claim, report.source = study.source;
  const std::string configs = config_summary(outcomes, options.overrides);
  report.setup = report.setup.empty() ? configs : configs + " " + report.setup;
  for (const RunOutcome& o : outcomes) {
    if (o.status == RunStatus::failed)
      report.failures.push_back(fmt::format(
          "{}: {}", o.request.id, o.message.empty() ? "failed without an error line (see its log.txt)" : o.message));
    report.run_dirs.push_back(fs::relative(o.dir, options.dir).string());
  }
  if (!report.failures.empty()) report.verdict = "incomplete";
  if (report.verdict == "incomplete")
    report.verdict_rule +=
        " Incomplete: a run failed, or a number a sub-claim needs is missing; nothing is decided "
        "(a sub-claim shown as \"cannot decide\" lacks its numbers).";
  return report;
}

StudyResult run_study(const Study& study, const StudyOptions& given, const RunnerOptions& runner) {
  StudyOptions options = given;
  const std::vector<RunRequest> requests = plan_study(study, options);
  const auto outcomes = run_grid(options.dir, requests, runner);
  write_summary_csv(options.dir / "summary.csv", outcomes);
  Report report = judge_study(study, options, outcomes);
  report.provenance = provenance(options, runner, outcomes);
  const fs::path html = write_report(options.dir, report);
  return {html, write_report_index(options.dir), report.verdict, report.failures};
}

double TrainCurve::final_loss() const {
  if (loss.empty()) return NAN;
  const size_t n = std::min<size_t>(3, loss.size());
  double s = 0;
  for (size_t i = loss.size() - n; i < loss.size(); ++i) s += loss[i];
  return s / static_cast<double>(n);
}

double TrainCurve::recent_drop() const {
  const size_t q = loss.size() / 4;
  if (q == 0) return NAN;
  double before = 0, last = 0;
  for (size_t i = 0; i < q; ++i) before += loss[loss.size() - 2 * q + i], last += loss[loss.size() - q + i];
  return (before - last) / static_cast<double>(q);
}

TrainCurve read_train_curve(const fs::path& run_dir) {
  TrainCurve c;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded() || j.value("type", "") != "train") continue;
    c.step.push_back(number(j, "step"));
    c.loss.push_back(number(j, "loss"));
  }
  return c;
}

Json last_probe(const fs::path& run_dir, const std::string& family) {
  std::ifstream in(run_dir / "probes.jsonl");
  Json last;
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("family", "") == family) last = j;
  }
  return last;
}

Json read_analysis(const fs::path& dir, const std::string& analysis) {
  std::ifstream in(dir / "analysis.jsonl");
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("analysis", "") == analysis) return j["result"];
  }
  return Json();
}

}  // namespace normlab::study
