#pragma once
// A study's report: the claim and its source, the setup, charts, tables coloured by outcome, the
// verdict with the numbers and rule behind it, and links to the run directories. Written as one
// self-contained HTML file (Chart.js from Debian's libjs-chart.js inlined: it opens offline) and a
// Markdown summary beside it for terminals and diffs.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/config_reader.h"
#include "study/claims.h"

namespace normlab::study {

struct Series {
  std::string label;
  std::vector<double> x, y;
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_y = false;
  bool log_x = false;
};

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row_class;  // optional per row: trained | slow | stalled | diverged (coloured)
};

// One look of a study at its numbers (--seeds auto looks again with more seeds while a sub-claim is unclear).
struct SeedLook {
  std::vector<int> seeds;
  std::string verdict, unclear;  // the verdict at this look and the ids of its unclear sub-claims
};

struct Report {
  std::string name, title, claim, source, setup;
  std::string paper_setting;  // the regime the paper states its claim in, beside this preset's `setup`
  std::string verdict;        // reproduced | partly reproduced | not reproduced | inconclusive | incomplete (a study's)
  std::string verdict_rule;   // what was compared, with which threshold
  std::vector<SubClaim> claims;  // decided by judge_study; each with its per-seed values, interval and rule
  std::string headline;          // the id of the sub-claim that carries the claim's main effect
  std::vector<SeedLook> looks;   // how the seeds were chosen (one look for a fixed seed list)
  Json record;                   // more facts for report.json: model size, steps, core-hours, CPU, corpus ...
  std::vector<std::string>
      failures;  // "<run>: <its error line>" for each run that failed (the verdict is then incomplete)
  std::vector<std::string> evidence;  // the numbers behind the verdict
  std::vector<Chart> charts;
  std::vector<Table> tables;
  std::vector<std::string> run_dirs;  // relative to the report
  // What run_dirs are, in the report's words: a study's run folders, or a ladder's rung reports.
  std::string run_dirs_heading = "Runs";
  std::string run_dirs_are = "directories under runs/";
  std::vector<std::string>
      provenance;  // what rerunning it takes: command, overrides, normlab commit, corpus, threads, seeds
};

// The model a report's runs trained, from its record (report.json): "d 64, 6–24 layers, 500 steps", or
// "d 64, 24 layers, init only" for a study that trains nothing.
std::string setting_text(const Json& record);

// Writes report.html, report.md and report.json (name, title, verdict, sub-claims with their per-seed values and
// intervals, the looks, `record`, when) into dir, with a paragraph naming each failing sub-claim "not reproduced
// at" the setting of `record` with its effect and interval, and seeds.csv (one row per sub-claim and seed) when there
// are sub-claims; returns the HTML path. A report without a verdict (a sweep's) has no verdict section. `stem` names
// the files (a ladder's report is ladder.html, .md and .json beside its rungs' folders).
std::filesystem::path write_report(const std::filesystem::path& dir, const Report& report,
                                   const std::string& stem = "report");

// A decided sub-claim as report.json records it: id, statement, statistic, per-seed values, mean, sd, interval,
// confidence, threshold, side and outcome.
Json sub_claim_json(const SubClaim& claim);

// What a report.json records, for overviews: the report's name (a study's, or "sweep"), title and
// verdict ("" for a sweep), and when it was written (UTC).
struct ReportEntry {
  std::filesystem::path dir;
  std::string name, title, verdict, written;
  Json json;  // the whole report.json
};
// The entry of the report in `dir`; nullopt when it has no readable report.json.
std::optional<ReportEntry> read_report_entry(const std::filesystem::path& dir);
// Writes studies.html into the folder that holds `report_dir` (runs/ for the default outputs): every
// report in a folder beside it, linked, with its verdict and time, newest first. Returns its path.
std::filesystem::path write_report_index(const std::filesystem::path& report_dir);

}  // namespace normlab::study
