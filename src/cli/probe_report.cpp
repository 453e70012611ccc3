#include "cli/probe_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <map>
#include <string_view>

#include "study/report.h"

namespace normlab::cli {

namespace {

// Columns that say where a value sits rather than what it is: they are table columns, never charted.
constexpr std::array<std::string_view, 7> kPlaces = {"layer",    "head",    "batch",   "row",
                                                     "position", "feature", "token_id"};

bool is_place(const std::string& column) { return std::find(kPlaces.begin(), kPlaces.end(), column) != kPlaces.end(); }

// Quantities that span orders of magnitude across layers (a massive activation against the rest) read on a log axis.
bool spans_magnitudes(const std::string& column) { return column == "max_abs" || column == "max_over_median"; }

std::string cell(const Json& v) {
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// One chart per numeric column of a result with a `layer` column: the value by layer, a series per head where the
// result has heads.
void add_charts(const std::string& analysis, const Json& result, study::Report& r) {
  if (!result.contains("layer") || !result["layer"].is_array()) return;
  const Json& layers = result["layer"];
  for (const auto& [column, values] : result.items()) {
    if (!values.is_array() || is_place(column) || values.empty() || !values[0].is_number()) continue;
    std::map<int, study::Series> by_head;
    for (size_t i = 0; i < values.size(); ++i) {
      if (!values[i].is_number()) continue;  // a median of 0 leaves max_over_median null
      const int head = result.contains("head") ? result["head"][i].get<int>() : -1;
      study::Series& s = by_head[head];
      if (s.label.empty()) s.label = head < 0 ? column : fmt::format("head {}", head);
      s.x.push_back(layers[i].get<double>());
      s.y.push_back(values[i].get<double>());
    }
    study::Chart chart{fmt::format("{}: {}", analysis, column), "layer", column, {}, spans_magnitudes(column)};
    for (auto& [head, series] : by_head) chart.series.push_back(std::move(series));
    r.charts.push_back(std::move(chart));
  }
}

// The result's array columns as a table, its single numbers as evidence lines.
void add_table(const std::string& analysis, const Json& result, study::Report& r) {
  study::Table table{analysis, {}, {}, {}};
  size_t rows = 0;
  for (const auto& [column, values] : result.items()) {
    if (!values.is_array()) {
      r.evidence.push_back(fmt::format("{}: {} = {}", analysis, column, cell(values)));
      continue;
    }
    table.header.push_back(column);
    rows = std::max(rows, values.size());
  }
  for (size_t i = 0; i < rows; ++i) {
    std::vector<std::string>& row = table.rows.emplace_back();
    for (const std::string& column : table.header)
      row.push_back(i < result[column].size() ? cell(result[column][i]) : "");
  }
  if (!table.header.empty()) r.tables.push_back(std::move(table));
}

}  // namespace

std::filesystem::path write_probe_report(const std::filesystem::path& dir, const ProbeReport& probe) {
  study::Report r;
  r.name = "probe";
  r.title = "normlab probe: " + probe.subject;
  std::string names;
  for (const auto& [name, result] : probe.results) names += (names.empty() ? "" : ", ") + name;
  r.claim = fmt::format("What {} show of {}, layer by layer (no verdict: a look, not a test).", names, probe.subject);
  r.source = "each analysis's paper, as `normlab probe --help` lists them (docs/usage.md, Looking at a released model)";
  r.setup = probe.setup;
  r.provenance = {probe.command};
  if (!probe.run_link.empty()) r.run_dirs = {probe.run_link};
  r.record = {{"kind", "probe"}, {"subject", probe.subject}, {"analyses", names}};
  for (const auto& [name, result] : probe.results) {
    add_charts(name, result, r);
    add_table(name, result, r);
  }
  return study::write_report(dir, r);
}

}  // namespace normlab::cli
