#include "study/report.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "common/config_reader.h"
#include "common/error.h"
#include "io/atomic_file.h"
#include "io/web.h"
#include "train/outcome.h"

namespace normlab::study {

using io::chart_js_source;
using io::html_escape;

namespace fs = std::filesystem;

namespace {

Json chart_config(const Chart& c) {
  static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22"};
  Json datasets = Json::array();
  for (size_t i = 0; i < c.series.size(); ++i) {
    Json points = Json::array();
    for (size_t j = 0; j < c.series[i].x.size(); ++j)
      if (std::isfinite(c.series[i].y[j])) points.push_back({{"x", c.series[i].x[j]}, {"y", c.series[i].y[j]}});
    datasets.push_back({{"label", c.series[i].label},
                        {"data", points},
                        {"borderColor", colours[i % 10]},
                        {"backgroundColor", colours[i % 10]},
                        {"showLine", true},
                        {"pointRadius", 2},
                        {"borderWidth", 1.5}});
  }
  return {
      {"type", "scatter"},
      {"data", {{"datasets", datasets}}},
      {"options",
       {{"animation", false},
        {"responsive", false},
        {"plugins", {{"title", {{"display", true}, {"text", c.title}}}}},
        {"scales",
         {{"x", {{"type", c.log_x ? "logarithmic" : "linear"}, {"title", {{"display", true}, {"text", c.x_label}}}}},
          {"y",
           {{"type", c.log_y ? "logarithmic" : "linear"}, {"title", {{"display", true}, {"text", c.y_label}}}}}}}}}};
}

// The verdict's colour, in a report and in the index of reports.
constexpr const char* kVerdictStyle = R"(
.reproduced, .holds { background: #d4edda; } .partly-reproduced { background: #e6f2d0; }
.not-reproduced, .fails { background: #f8d7da; } .inconclusive, .unclear { background: #fff3cd; }
.incomplete, .undecided { background: #e2e3e5; })";

std::string verdict_class(std::string verdict) {
  std::replace(verdict.begin(), verdict.end(), ' ', '-');
  return verdict;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &tm);
  return text;
}

// A grid cell that starts with an outcome (trained, slow, stalled, diverged, failed) is coloured by it.
std::string cell_tag(const std::string& cell) {
  for (const train::Outcome outcome : train::kOutcomes)
    if (outcome != train::Outcome::missing && cell.starts_with(outcome_name(outcome)))
      return fmt::format("<td class=\"{}\">", outcome_name(outcome));
  return "<td>";
}

// A Markdown table cell: a literal '|' (as in |ln x| or max|x|) would end the cell.
std::string md_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string html_table(const Table& t) {
  std::string html = "<h3>" + html_escape(t.title) + "</h3>\n<table><tr>";
  for (const auto& h : t.header) html += "<th>" + html_escape(h) + "</th>";
  html += "</tr>\n";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const bool coloured = i < t.row_class.size() && !t.row_class[i].empty();
    html += coloured ? fmt::format("<tr class=\"{}\">", t.row_class[i]) : std::string("<tr>");
    for (const auto& cell : t.rows[i]) html += cell_tag(cell) + html_escape(cell) + "</td>";
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

std::string markdown_table(const Table& t) {
  std::string md = "\n**" + t.title + "**\n\n|";
  for (const auto& h : t.header) md.append(" ").append(md_cell(h)).append(" |");
  md += "\n|";
  for (size_t i = 0; i < t.header.size(); ++i) md += "---|";
  md += "\n";
  for (const auto& row : t.rows) {
    md += "|";
    for (const auto& cell : row) md.append(" ").append(md_cell(cell)).append(" |");
    md += "\n";
  }
  return md;
}

const char* truth_name(Truth t) {
  switch (t) {
    case Truth::holds:
      return "holds";
    case Truth::fails:
      return "fails";
    case Truth::unclear:
      return "unclear";
    case Truth::undecided:
      break;
  }
  return "undecided";
}

// A sub-claim's values, seed by seed: "1: 0.412, 2: 0.398, 3: 0.455".
std::string per_seed_text(const SeedValues& v) {
  std::string out;
  for (size_t i = 0; i < v.n(); ++i) out += fmt::format("{}{}: {}", i ? ", " : "", v.seeds[i], num(v.values[i]));
  return out;
}

// The control at init: "1.2 ± 0.1 (3 seeds): would already hold", or "—" for a sub-claim not about training.
std::string init_control_text(const SubClaim& c) {
  if (c.at_init.values.empty()) return "—";
  const char* already = c.init_truth == Truth::holds   ? "would already hold"
                        : c.init_truth == Truth::fails ? "would fail"
                                                       : "undecided";
  return fmt::format("{}{}: {}", c.init_statistic.empty() ? "" : c.init_statistic + ": ", c.at_init.show(), already);
}

// The sub-claims as a table: id, claim, statistic, per seed, mean ± sd, interval, threshold, outcome.
Table claims_table(const Report& r) {
  Table t{"Sub-claims: each one number per seed, decided by its interval (a count: by the exact sign test)",
          {"", "claim", "statistic (per seed)", "seeds", "mean ± sd", "interval", "holds when", "outcome",
           "at init (control)"}};
  for (const SubClaim& c : r.claims) {
    t.rows.push_back({c.id + (c.id == r.headline ? " (headline)" : ""), c.statement, c.statistic,
                      per_seed_text(c.values), c.values.show(), c.interval(), c.threshold(), c.outcome(),
                      init_control_text(c)});
    t.row_class.push_back(truth_name(c.truth));
  }
  return t;
}

// How the seeds were chosen: "seeds 1–5: 3 at the first look (B unclear), 5 at the second".
std::string looks_text(const Report& r) {
  std::string out;
  for (size_t i = 0; i < r.looks.size(); ++i) {
    const SeedLook& look = r.looks[i];
    out += fmt::format("{}look {}: {} seed{} ({}), {}{}", i ? "; " : "", i + 1, look.seeds.size(),
                       look.seeds.size() == 1 ? "" : "s", fmt::join(look.seeds, ", "), look.verdict,
                       look.unclear.empty() ? "" : " (unclear: " + look.unclear + ")");
  }
  return out.empty() ? "one look" : out;
}

// Each failing sub-claim with its effect and interval, or "" when none fails: the report says it is "not reproduced
// at" this preset's setting, a finding about that setting rather than about the paper's.
std::string failing_text(const Report& r) {
  std::string failing;
  for (const SubClaim& c : r.claims)
    if (c.truth == Truth::fails)
      failing += fmt::format("{}{} ({}): {} {}, needs {}", failing.empty() ? "" : "; ", c.id, c.statement,
                             num(c.values.mean()), c.interval(), c.threshold());
  if (failing.empty()) return failing;
  return (r.paper_setting.empty() ? ": " : " (this preset; the paper's setting is above): ") + failing;
}

// A CSV field, quoted, with inner quotes doubled.
std::string csv_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

Json sub_claim_json(const SubClaim& c) {
  Json seeds = Json::object();
  for (size_t i = 0; i < c.values.n(); ++i)
    seeds[std::to_string(c.values.seeds[i])] = std::isfinite(c.values.values[i]) ? Json(c.values.values[i]) : Json();
  const auto number = [](double v) { return std::isfinite(v) ? Json(v) : Json(); };
  Json json = {{"id", c.id},
               {"statement", c.statement},
               {"statistic", c.statistic},
               {"per_seed", seeds},
               {"n", c.values.n()},
               {"mean", number(c.values.mean())},
               {"sd", number(c.values.sd())},
               {"interval", {number(c.interval_lo), number(c.interval_hi)}},
               {"confidence", c.confidence},
               {"threshold", c.threshold()},
               {"side", c.side == SubClaim::Side::above   ? "above"
                        : c.side == SubClaim::Side::below ? "below"
                                                          : "within"},
               {"lo", c.lo},
               {"hi", c.hi},
               {"outcome", truth_name(c.truth)},
               {"said", c.outcome()}};
  if (!c.quote.empty()) json["quote"] = c.quote;
  if (!c.where.empty()) json["where"] = c.where;
  json["test"] = c.test_name();
  json["p_value"] = number(c.p_value);
  if (c.test == SubClaim::Test::sign) {
    const SubClaim::Counts n = c.counts();
    json["counts"] = {{"claimed", n.claimed}, {"reverse", n.reverse}, {"alike", n.ties}};
  }
  if (!c.at_init.values.empty()) {
    Json init = Json::object();
    for (size_t i = 0; i < c.at_init.n(); ++i) init[std::to_string(c.at_init.seeds[i])] = number(c.at_init.values[i]);
    json["at_init"] = {{"statistic", c.init_statistic},
                       {"per_seed", init},
                       {"mean", number(c.at_init.mean())},
                       {"outcome", truth_name(c.init_truth)}};
  }
  return json;
}

std::string setting_text(const Json& record) {
  const auto range = [](const Json* v) {
    std::vector<int> x = v && v->is_array() ? v->get<std::vector<int>>() : std::vector<int>{};
    if (x.empty()) return std::string("—");
    return x.front() == x.back() ? std::to_string(x.front()) : fmt::format("{}–{}", x.front(), x.back());
  };
  const auto field = [&](const char* key) { return record.contains(key) ? &record[key] : nullptr; };
  const std::string steps = range(field("train_steps"));
  return fmt::format("d {}, {} layers{}", range(field("d_model")), range(field("n_layers")),
                     steps == "—" ? ", init only" : ", " + steps + " steps");
}

namespace {

// What the papers say, one line per sub-claim that quotes its paper: "A1 (Xiong et al. 2020, §3.3): …".
std::vector<std::string> quotes(const Report& r) {
  std::vector<std::string> out;
  for (const SubClaim& c : r.claims)
    if (!c.quote.empty())
      out.push_back(fmt::format("{}{}: {}", c.id, c.where.empty() ? "" : " (" + c.where + ")", c.quote));
  return out;
}

// The page's head: its title, styles and the inlined Chart.js.
std::string html_head(const Report& r) {
  return R"(<!DOCTYPE html><html><head><meta charset="utf-8"><title>)" + html_escape(r.title) + R"(</title>
<style>
body { font-family: sans-serif; max-width: 1000px; margin: 2em auto; color: #222; }
.verdict { font-size: 1.3em; padding: .5em 1em; border-radius: 6px; display: inline-block; })" +
         kVerdictStyle + R"(
table { border-collapse: collapse; margin: 1em 0; } td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
tr.trained, td.trained { background: #d4edda; } tr.stalled, td.stalled { background: #fff3cd; }
tr.slow, td.slow { background: #e2f0fb; }
tr.diverged, td.diverged, td.failed { background: #f8d7da; }
canvas { margin: 1em 0; border: 1px solid #eee; }
</style>
<script>window.__errors = 0; window.addEventListener('error', () => { window.__errors++; });</script>
<script>)" +
         chart_js_source() +
         R"(</script></head><body>
)";
}

// The claim, setup, verdict with its rule and sub-claims, what failed, and the evidence.
std::string html_verdict(const Report& r) {
  std::string html = "<h1>" + html_escape(r.title) + "</h1>\n<p><b>Claim.</b> " + html_escape(r.claim) +
                     "</p>\n<p><b>Source.</b> " + html_escape(r.source) + "</p>\n<p><b>Setup.</b> " +
                     html_escape(r.setup) + "</p>\n";
  if (!r.paper_setting.empty()) html += "<p><b>The paper's setting.</b> " + html_escape(r.paper_setting) + "</p>\n";
  if (!r.verdict.empty())
    html += "<h2>Verdict</h2>\n<p class=\"verdict " + verdict_class(r.verdict) + "\">" + html_escape(r.verdict) +
            "</p>\n<p><b>Rule.</b> " + html_escape(r.verdict_rule) + "</p>\n";
  if (!r.claims.empty())
    html += html_table(claims_table(r)) + "<p><b>Seeds.</b> " + html_escape(looks_text(r)) + "</p>\n";
  for (const std::string& q : quotes(r)) html += "<p class=\"quote\">" + html_escape(q) + "</p>\n";
  if (const std::string failing = failing_text(r); !failing.empty())
    html += "<p class=\"fails\"><b>Not reproduced at " + html_escape(setting_text(r.record)) + "</b>" +
            html_escape(failing) + ".</p>\n";
  if (!r.failures.empty()) {
    html +=
        "<p><b>Failed runs</b> (nothing is decided from them; fix the cause and rerun the same command):</p>\n<ul>\n";
    for (const auto& f : r.failures) html += "<li>" + html_escape(f) + "</li>\n";
    html += "</ul>\n";
  }
  html += "<ul>\n";
  for (const auto& e : r.evidence) html += "<li>" + html_escape(e) + "</li>\n";
  return html + "</ul>\n";
}

// The charts' canvases and tables, how to reproduce it, the runs, and the script that draws the charts.
std::string html_evidence(const Report& r) {
  std::string html = "<h2>Evidence</h2>\n";
  for (size_t i = 0; i < r.charts.size(); ++i)
    html += fmt::format("<canvas id=\"chart{}\" width=\"900\" height=\"380\"></canvas>\n", i);
  for (const Table& t : r.tables) html += html_table(t);
  if (!r.provenance.empty()) {
    html += "<h2>Reproduce</h2>\n<ul>\n";
    for (const auto& p : r.provenance) html += "<li>" + html_escape(p) + "</li>\n";
    html += "</ul>\n";
  }
  html += "<h2>" + html_escape(r.run_dirs_heading) + "</h2>\n<ul>\n";
  for (const auto& d : r.run_dirs) html += "<li><a href=\"" + html_escape(d) + "\">" + html_escape(d) + "</a></li>\n";
  html += "</ul>\n<script>\nconst configs = [";
  for (size_t i = 0; i < r.charts.size(); ++i) {
    if (i) html += ",";
    html += chart_config(r.charts[i]).dump();
  }
  // After drawing, every canvas is checked for painted pixels; the body's data attributes record the
  // result so a headless browser (the report test) can read it from the DOM.
  html += R"(];
configs.forEach((c, i) => new Chart(document.getElementById('chart' + i), c));
let drawn = 0;
document.querySelectorAll('canvas').forEach(cv => {
  const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
  for (let k = 3; k < d.length; k += 4) if (d[k] !== 0) { drawn++; break; }
});
document.body.setAttribute('data-charts', configs.length);
document.body.setAttribute('data-charts-drawn', drawn);
document.body.setAttribute('data-errors', window.__errors);
</script></body></html>
)";
  return html;
}

std::string markdown_report(const Report& r, const std::string& stem) {
  std::string md = "# " + r.title + "\n\n**Claim.** " + r.claim + "\n\n**Source.** " + r.source + "\n\n**Setup.** " +
                   r.setup + "\n\n";
  if (!r.paper_setting.empty()) md += "**The paper's setting.** " + r.paper_setting + "\n\n";
  if (!r.verdict.empty()) md += "## Verdict: " + r.verdict + "\n\n**Rule.** " + r.verdict_rule + "\n\n";
  if (!r.claims.empty()) md += markdown_table(claims_table(r)) + "\n**Seeds.** " + looks_text(r) + "\n\n";
  for (const std::string& q : quotes(r)) md += "> " + q + "\n\n";
  if (const std::string failing = failing_text(r); !failing.empty())
    md += "**Not reproduced at " + setting_text(r.record) + "**" + failing + ".\n\n";
  if (!r.failures.empty()) {
    md += "**Failed runs** (nothing is decided from them; fix the cause and rerun the same command):\n\n";
    for (const auto& f : r.failures) md += "* " + f + "\n";
    md += "\n";
  }
  for (const auto& e : r.evidence) md += "- " + e + "\n";
  for (const Table& t : r.tables) md += markdown_table(t);
  if (!r.provenance.empty()) {
    md += "\n## Reproduce\n\n";
    for (const auto& p : r.provenance) md += "* " + p + "\n";
  }
  md += fmt::format("\nCharts: {}.html. {}: {} {}.\n", stem, r.run_dirs_heading, r.run_dirs.size(), r.run_dirs_are);
  return md;
}

// report.json and seeds.csv (one row per sub-claim and seed).
void write_json_report(const fs::path& dir, const Report& r, const std::string& stem) {
  Json json = r.record.is_object() ? r.record : Json::object();
  json.update(Json{{"name", r.name}, {"title", r.title}, {"verdict", r.verdict}, {"written", utc_now()}});
  if (!r.claims.empty()) {
    json["claim"] = r.claim, json["source"] = r.source, json["paper_setting"] = r.paper_setting;
    json["setup"] = r.setup, json["rule"] = r.verdict_rule, json["headline"] = r.headline;
    json["failing"] = ids_where(r.claims, Truth::fails), json["unclear"] = ids_where(r.claims, Truth::unclear);
    json["sub_claims"] = Json::array();
    for (const SubClaim& c : r.claims) json["sub_claims"].push_back(sub_claim_json(c));
    json["looks"] = Json::array();
    for (const SeedLook& look : r.looks)
      json["looks"].push_back({{"seeds", look.seeds}, {"verdict", look.verdict}, {"unclear", look.unclear}});
    json["provenance"] = r.provenance;
    std::string csv = "sub_claim,seed,value,statistic\n";
    for (const SubClaim& c : r.claims)
      for (size_t i = 0; i < c.values.n(); ++i)
        csv += fmt::format("{},{},{},{}\n", c.id, c.values.seeds[i], c.values.values[i], csv_quoted(c.statistic));
    io::write_file_atomic(dir / "seeds.csv", csv);
  }
  io::write_file_atomic(dir / (stem + ".json"), json.dump(2) + "\n");
}

}  // namespace

fs::path write_report(const fs::path& dir, const Report& r, const std::string& stem) {
  fs::create_directories(dir);
  io::write_file_atomic(dir / (stem + ".html"), html_head(r) + html_verdict(r) + html_evidence(r));
  io::write_file_atomic(dir / (stem + ".md"), markdown_report(r, stem));
  write_json_report(dir, r, stem);
  return dir / (stem + ".html");
}

std::optional<ReportEntry> read_report_entry(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "report.json", ec)) return std::nullopt;
  const Json j = parse_json_or_discarded(io::read_file(dir / "report.json", "report summary"));
  if (!j.is_object()) return std::nullopt;
  const auto text = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
  };
  return ReportEntry{dir, text("name"), text("title"), text("verdict"), text("written"), j};
}

fs::path write_report_index(const fs::path& report_dir) {
  fs::path dir = fs::absolute(report_dir).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "runs/study-x/"
  const fs::path folder = dir.parent_path();
  std::vector<ReportEntry> entries;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.is_directory(ec))
      if (auto entry = read_report_entry(e.path())) entries.push_back(*entry);
  std::sort(entries.begin(), entries.end(), [](const ReportEntry& a, const ReportEntry& b) {
    return a.written != b.written ? a.written > b.written : a.dir < b.dir;
  });
  std::string html = R"(<!DOCTYPE html><html><head><meta charset="utf-8"><title>normlab reports</title>
<style>
body { font-family: sans-serif; max-width: 1000px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; })" +
                     std::string(kVerdictStyle) + R"(
</style></head><body>
<h1>Reports in )" + html_escape(folder.string()) +
                     R"(</h1>
<table><tr><th>report</th><th>verdict</th><th>title</th><th>written</th></tr>
)";
  for (const ReportEntry& e : entries) {
    const std::string name = e.dir.filename().string();
    html += "<tr><td><a href=\"" + html_escape(name) + "/report.html\">" + html_escape(name) + "</a></td><td class=\"" +
            verdict_class(e.verdict) + "\">" + html_escape(e.verdict.empty() ? "(a sweep: no verdict)" : e.verdict) +
            "</td><td>" + html_escape(e.title) + "</td><td>" + html_escape(e.written) + "</td></tr>\n";
  }
  html += "</table>\n</body></html>\n";
  io::write_file_atomic(folder / "studies.html", html);
  return folder / "studies.html";
}

}  // namespace normlab::study
