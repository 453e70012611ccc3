#pragma once
// A study's report: the claim and its source, the setup, charts, tables coloured by outcome, the
// verdict with the numbers and rule behind it, and links to the run directories. Written as one
// self-contained HTML file (Chart.js from Debian's libjs-chart.js inlined: it opens offline) and a
// Markdown summary beside it for terminals and diffs.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace normlab::study {

struct Series {
  std::string label;
  std::vector<double> x, y;
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_y = false;
};

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row_class;  // optional per row: trained | slow | stalled | diverged (coloured)
};

struct Report {
  std::string name, title, claim, source, setup;
  std::string verdict;       // reproduced | not reproduced | inconclusive | incomplete
  std::string verdict_rule;  // what was compared, with which threshold
  std::vector<std::string>
      failures;  // "<run>: <its error line>" for each run that failed (the verdict is then incomplete)
  std::vector<std::string> evidence;  // the numbers behind the verdict
  std::vector<Chart> charts;
  std::vector<Table> tables;
  std::vector<std::string> run_dirs;  // relative to the report
  std::vector<std::string>
      provenance;  // what rerunning it takes: command, overrides, normlab commit, corpus, threads, seeds
};

// Writes report.html, report.md and report.json (name, title, verdict, when) into dir; returns the
// HTML path. A report without a verdict (a sweep's) has no verdict section.
std::filesystem::path write_report(const std::filesystem::path& dir, const Report& report);

// What a report.json records, for overviews: the report's name (a study's, or "sweep"), title and
// verdict ("" for a sweep), and when it was written (UTC).
struct ReportEntry {
  std::filesystem::path dir;
  std::string name, title, verdict, written;
};
// The entry of the report in `dir`; nullopt when it has no readable report.json.
std::optional<ReportEntry> read_report_entry(const std::filesystem::path& dir);
// Writes studies.html into the folder that holds `report_dir` (runs/ for the default outputs): every
// report in a folder beside it, linked, with its verdict and time, newest first. Returns its path.
std::filesystem::path write_report_index(const std::filesystem::path& report_dir);

// Chart.js from Debian's libjs-chart.js (the reports inline it, `normlab serve` serves it); fails naming
// the package when it is missing.
std::string chart_js_source();

// Text made safe inside HTML elements and double-quoted attributes (&, <, >, ").
std::string html_escape(const std::string& s);

// A sub-claim's outcome. A number it needs that is missing (NaN: a run failed, a file lacks a record)
// is evidence neither way: the sub-claim is then undecided. `unclear`: every number is there, but the
// seeds disagree on the direction or the gap is within their spread (kit.h's seed rule), so the claim
// is neither shown nor refuted.
enum class Truth { holds, fails, undecided, unclear };
// Both hold: fails if either fails, else undecided if either is, else unclear if either is.
Truth operator&&(Truth a, Truth b);
// Either holds: holds if either holds, else undecided if either is, else unclear if either is.
Truth operator||(Truth a, Truth b);
Truth operator!(Truth a);  // undecided and unclear stay as they are
inline Truth truth(bool b) { return b ? Truth::holds : Truth::fails; }

// The verdict from the sub-claims: any undecided → incomplete; all hold → reproduced; all fail →
// not reproduced; else (some hold, or some are unclear over the seeds) inconclusive.
std::string combine_verdicts(const std::vector<Truth>& claims);

}  // namespace normlab::study
