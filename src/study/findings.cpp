#include "study/findings.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "study/claims.h"
#include "study/report.h"
#include "study/studies.h"

namespace normlab::study {

namespace fs = std::filesystem;

namespace {

// The reports kept for one study: the default preset on the design seeds (first seed below 100) and on the fresh
// seeds (from 101), and the large preset. The newest report of each kind wins.
struct Kept {
  std::optional<ReportEntry> design, fresh, large;
};

Kept kept_reports(const fs::path& results, std::string_view study) {
  Kept k;
  std::error_code ec;
  std::vector<ReportEntry> entries;
  for (const auto& e : fs::directory_iterator(results / std::string(study), ec))
    if (e.is_directory(ec))
      if (auto entry = read_report_entry(e.path()); entry && entry->json.contains("sub_claims"))
        entries.push_back(*entry);
  std::sort(entries.begin(), entries.end(),
            [](const ReportEntry& a, const ReportEntry& b) { return a.written < b.written; });
  for (ReportEntry& e : entries) {
    const std::string preset = e.json.value("preset", "default");
    const auto& seeds = e.json["seeds"];
    const bool fresh = seeds.is_array() && !seeds.empty() && seeds.front().get<int>() > 100;
    if (preset == "large") k.large = e;
    else if (preset == "default") (fresh ? k.fresh : k.design) = e;
  }
  return k;
}

std::string seeds_text(const Json& report) {
  std::vector<int> seeds = report["seeds"].get<std::vector<int>>();
  return describe_seeds(seeds);
}

// "reproduced", "partly reproduced (fails: B2)", "inconclusive (unclear: B1)".
std::string verdict_text(const Json& r) {
  const std::string verdict = r.value("verdict", "");
  const std::string failing = r.value("failing", ""), unclear = r.value("unclear", "");
  if (verdict == "partly reproduced") return fmt::format("**{}** (fails: {})", verdict, failing);
  if (verdict == "inconclusive")
    return fmt::format("**{}** (unclear: {}{})", verdict, unclear, failing.empty() ? "" : "; fails: " + failing);
  return "**" + verdict + "**";
}

const Json* headline_claim(const Json& r) {
  for (const Json& c : r["sub_claims"])
    if (c.value("id", "") == r.value("headline", "")) return &c;
  return nullptr;
}

// A sub-claim's mean and interval: "1.310 [0.920, 1.700]".
std::string effect_of(const Json& claim) {
  const auto number = [](const Json& v) { return v.is_number() ? num(v.get<double>()) : std::string("n/a"); };
  return fmt::format("{} [{}, {}]", number(claim["mean"]), number(claim["interval"][0]), number(claim["interval"][1]));
}

// The headline sub-claim's effect.
std::string effect_text(const Json& r) {
  const Json* c = headline_claim(r);
  return c ? effect_of(*c) : "n/a";
}

// Text inside a Markdown table cell: a '|' would end the cell.
std::string md_cell(std::string_view text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string cell(const std::optional<ReportEntry>& e) {
  return e ? fmt::format("{}, seeds {}", verdict_text(e->json), seeds_text(e->json)) : "not run";
}

// The paper part of a source: up to the first ", " that follows a year or the first ';'.
std::string paper_of(std::string_view source) {
  const size_t semicolon = source.find(';');
  std::string first(source.substr(0, semicolon));
  if (const size_t paren = first.find(" ("); paren != std::string::npos) first = first.substr(0, paren);
  return first;
}

// The training a study's `--large` preset plans, in layer-steps (steps × layers over its runs).
long long large_layer_steps(const Study& s) {
  StudyOptions large;
  use_large_preset(s, large);
  return layer_steps(plan_study(s, large));
}

// "12,345,678".
std::string grouped(long long n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Each failing sub-claim of the design and fresh reports, with what the study's `--large` preset would cost at
// the core-seconds per layer-step the flagship's kept large run measured (only layer-steps when none is kept).
std::string not_reproduced_section(const fs::path& results) {
  std::string rows;
  double seconds_per_layer_step = 0;
  if (const Kept flagship = kept_reports(results, "why-pre-ln"); flagship.large)
    seconds_per_layer_step = flagship.large->json.value("core_hours", 0.0) * 3600 /
                             double(std::max(1LL, large_layer_steps(find_study("why-pre-ln"))));
  for (const Study* s : all_studies()) {
    const Kept k = kept_reports(results, s->name);
    std::optional<long long> steps;  // planned only for a study with a failing sub-claim
    for (const auto& [set, e] : {std::pair{"design", &k.design}, std::pair{"fresh", &k.fresh}}) {
      if (!*e) continue;
      const Json& r = (*e)->json;
      for (const Json& c : r["sub_claims"]) {
        if (c.value("outcome", "") != "fails") continue;
        if (!steps) steps = large_layer_steps(*s);
        const std::string price = *steps == 0 ? "init only: minutes"
                                  : seconds_per_layer_step > 0
                                      ? fmt::format("{} layer-steps ≈ {:.1f} core-hours", grouped(*steps),
                                                    *steps * seconds_per_layer_step / 3600)
                                      : grouped(*steps) + " layer-steps";
        rows += fmt::format("| [{}]({}/) | {}, seeds {} | {}: {} | {} | {} | {} | {} |\n", s->name, s->name, set,
                            seeds_text(r), c.value("id", ""), md_cell(c.value("statement", "")), effect_of(c),
                            c.value("threshold", ""), setting_text(r), price);
      }
    }
  }
  if (rows.empty()) return rows;
  return "\n## Not reproduced at this setting\n\nEach sub-claim that fails on a seed set, with what it measured at the "
         "study's default preset (its size under \"this preset\"): a finding about that setting, not a verdict on "
         "the paper's. Beside it, what the study's `--large` preset (docs/studies.md: where the paper's scale "
         "begins) would cost, at the core-seconds per layer-step that the flagship's large run measured "
         "(`why-pre-ln/large`).\n\n| study | seeds | sub-claim | measured [interval] | needs | this preset | "
         "`--large` |\n|---|---|---|---|---|---|---|\n" +
         rows;
}

}  // namespace

std::string findings_table(const fs::path& results, const std::string& link_prefix) {
  std::string md =
      "| study | claim | paper | design seeds | fresh seeds | headline effect, design / fresh [interval] | model | "
      "core-hours |\n|---|---|---|---|---|---|---|---|\n";
  for (const Study* s : all_studies()) {
    const Kept k = kept_reports(results, s->name);
    const auto effect = [](const std::optional<ReportEntry>& e) { return e ? effect_text(e->json) : "—"; };
    const std::optional<ReportEntry>& any = k.fresh ? k.fresh : k.design;
    double hours = 0;
    for (const auto* e : {&k.design, &k.fresh})
      if (*e) hours += (*e)->json.value("core_hours", 0.0);
    md += fmt::format("| [{}]({}{}/) | {} | {} | {} | {} | {}: {} / {} | {} | {} |\n", s->name, link_prefix, s->name,
                      md_cell(s->title), md_cell(paper_of(s->source)), cell(k.design), cell(k.fresh),
                      any ? any->json.value("headline", "") : std::string("—"), effect(k.design), effect(k.fresh),
                      any ? setting_text(any->json) : std::string("—"), any ? fmt::format("{:.2f}", hours) : "—");
  }
  return md;
}

std::string findings_index(const fs::path& results) {
  std::string md =
      "# What the studies found\n\n"
      "Generated by `normlab study index results` from the `report.json` of each study kept here; do not edit by "
      "hand (a test regenerates it and compares). Each study ran its default preset on the design seeds (1, 2, 3 "
      "…) and again, with nothing retuned, on the fresh seeds (101, 102, 103 …), with `--seeds auto`: 3 seeds, "
      "then 2 more at a time while a sub-claim's interval reaches across its threshold, up to 8. A sub-claim holds "
      "when its interval (Student t over the seeds, Bonferroni over the planned looks) lies wholly past its "
      "threshold; see docs/studies.md for the rule and each study's regime.\n\n" +
      findings_table(results);
  std::string headlines;
  for (const Study* s : all_studies()) {
    const Kept k = kept_reports(results, s->name);
    const std::optional<ReportEntry>& any = k.fresh ? k.fresh : k.design;
    if (!any) continue;
    if (const Json* c = headline_claim(any->json))
      headlines += fmt::format("- `{}` {}: {} — {} ({})\n", s->name, c->value("id", ""), c->value("statement", ""),
                               c->value("statistic", ""), c->value("threshold", ""));
  }
  if (!headlines.empty()) md += "\n## Headline sub-claims\n\n" + headlines;
  md += not_reproduced_section(results);
  std::string large;
  for (const Study* s : all_studies())
    if (const Kept k = kept_reports(results, s->name); k.large)
      large += fmt::format("| [{}]({}/{}/) | {}, seeds {} | {}: {} | {} | {:.2f} |\n", s->name, s->name,
                           k.large->dir.filename().string(), verdict_text(k.large->json), seeds_text(k.large->json),
                           k.large->json.value("headline", ""), effect_text(k.large->json), setting_text(k.large->json),
                           k.large->json.value("core_hours", 0.0));
  if (!large.empty())
    md +=
        "\n## Large presets (`--large`)\n\n| study | verdict | headline effect [interval] | model | core-hours |\n"
        "|---|---|---|---|---|\n" +
        large;
  return md;
}

std::string with_readme_findings(const std::string& readme, const fs::path& results) {
  const size_t begin = readme.find(kReadmeFindingsBegin), end = readme.find(kReadmeFindingsEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin)
    fail("the README has no findings block: put the lines\n{}\n{}\nwhere the table goes", kReadmeFindingsBegin,
         kReadmeFindingsEnd);
  const size_t after_begin = begin + std::string_view(kReadmeFindingsBegin).size();
  return readme.substr(0, after_begin) + "\n" + findings_table(results, "results/") + readme.substr(end);
}

}  // namespace normlab::study
