#include "study/studies.h"

#include <array>
#include <cmath>
#include <fstream>
#include <iostream>

#include "common/error.h"
#include "study/catalog.h"

namespace normlab::study {

namespace fs = std::filesystem;

namespace {
const std::array kStudies = {
    &kWhyPreLn,      &kGradByDepth,      &kStreamAtInit,       &kWarmupGrid,     &kModelUpdate,    &kOneStep,
    &kDepthVariance, &kLayerImportance,  &kGradBalance,        &kRmsEquivalence, &kMassiveActivations, &kDytAlpha,
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

fs::path run_study(const Study& study, const StudyOptions& given, const RunnerOptions& runner) {
  StudyOptions options = given;
  if (options.seeds <= 0) options.seeds = options.quick ? 1 : study.default_seeds;
  std::vector<RunRequest> requests = study.plan(options);
  for (RunRequest& r : requests)
    for (const auto& o : options.overrides) apply_override(r.config, o);
  const auto outcomes = run_grid(options.dir, requests, runner);
  write_summary_csv(options.dir / "summary.csv", outcomes);
  Report report = study.judge(options, outcomes);
  report.name = study.name, report.title = study.title, report.claim = study.claim, report.source = study.source;
  for (const RunOutcome& o : outcomes) report.run_dirs.push_back(fs::relative(o.dir, options.dir).string());
  return write_report(options.dir, report);
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
    c.step.push_back(j["step"].get<double>());
    c.loss.push_back(j["loss"].get<double>());
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
