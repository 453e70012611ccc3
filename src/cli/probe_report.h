#pragma once
// The report of `normlab probe`: the analyses' results as a study's report (study/report.h) without a verdict: a chart
// of each per-layer quantity by layer, a table of each analysis and its single numbers. `normlab serve` lists the
// folder it is written to with the studies (it holds a report.md) and links its report.html.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/config_reader.h"

namespace normlab::cli {

struct ProbeReport {
  std::string subject;   // what was probed: the run folder, or "a fresh init of <placement>"
  std::string setup;     // the model and the tokens read, for people
  std::string command;   // the command line that made it, to reproduce it
  std::string run_link;  // the run folder, relative to the report's folder ("" for a fresh init)
  std::vector<std::pair<std::string, Json>> results;  // each analysis's name and result, in the order they ran
};

// Writes report.html, report.md and report.json into `dir`; returns report.html's path.
std::filesystem::path write_probe_report(const std::filesystem::path& dir, const ProbeReport& probe);

}  // namespace normlab::cli
