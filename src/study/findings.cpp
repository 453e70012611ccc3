#include "study/findings.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "common/config_reader.h"
#include "io/atomic_file.h"
#include "study/claims.h"
#include "study/preregistration.h"
#include "study/report.h"
#include "study/studies.h"

namespace normlab::study {

namespace fs = std::filesystem;

namespace {

// The reports kept for one study: the default preset on the design seeds (first seed below 101), on the fresh seeds
// (101-1000: kept from before freezing existed) and on the unseen seeds (from 1001: run after the freeze), and the
// large preset. The newest report of each kind wins.
struct Kept {
  std::optional<ReportEntry> design, fresh, unseen, large;
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
    const int first = seeds.is_array() && !seeds.empty() ? seeds.front().get<int>() : 1;
    if (preset == "large") k.large = e;
    else if (preset == "default") (first >= kFirstUnseenSeed ? k.unseen : first > 100 ? k.fresh : k.design) = e;
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

// A sub-claim's mean and interval, "1.310 [0.920, 1.700]", or a count's seeds on each side and its sign test's p,
// "6 vs 0 seeds, p = 0.031".
std::string effect_of(const Json& claim) {
  const auto number = [](const Json& v) { return v.is_number() ? num(v.get<double>()) : std::string("n/a"); };
  if (claim.contains("counts"))
    return fmt::format("{} vs {} seeds, p = {}", claim["counts"]["claimed"].get<int>(),
                       claim["counts"]["reverse"].get<int>(), number(claim["p_value"]));
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
    for (const auto& [set, e] :
         {std::pair{"design", &k.design}, std::pair{"fresh", &k.fresh}, std::pair{"unseen", &k.unseen}}) {
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

// A ladder's trend of one sub-claim: "approaching the paper's regime, slope 0.410 [0.290, 0.530]".
std::string trend_text(const Json& trend) {
  const Json mean = trend.value("mean", Json()), interval = trend.value("interval", Json::array());
  const bool has = interval.is_array() && interval.size() == 2 && interval[0].is_number() && interval[1].is_number();
  return fmt::format(
      "{}, slope {}{}", trend.value("direction", "undecided"),
      mean.is_number() ? num(mean.get<double>()) : std::string("—"),
      has ? fmt::format(" [{}, {}]", num(interval[0].get<double>()), num(interval[1].get<double>())) : std::string());
}

// One ladder.json's rows: each sub-claim's trend and first holding rung.
std::string ladder_rows(std::string_view study, const std::string& folder, const Json& ladder) {
  std::vector<std::string> rungs, seeds;
  for (const Json& r : ladder.value("rungs", Json::array())) rungs.push_back(r.value("value", Json()).dump());
  for (const Json& seed : ladder.value("seeds", Json::array())) seeds.push_back(seed.dump());
  std::string rows;
  for (const Json& c : ladder.value("sub_claims", Json::array())) {
    const Json first = c.value("first_holding_rung", Json());
    rows += fmt::format("| [{}]({}/{}/ladder.md) | {} ∈ {{{}}}, seeds {} | {}: {} | {} | {} |\n", study, study, folder,
                        ladder.value("axis", ""), fmt::join(rungs, ", "), fmt::join(seeds, ","), c.value("id", ""),
                        md_cell(c.value("statement", "")), trend_text(c.value("trend", Json::object())),
                        first.is_number() ? first.dump() : std::string("none"));
  }
  return rows;
}

// A study's kept ladder folders, by name: results/<study>/ladder and any ladder-<seed set> beside it (the same ladder
// on another seed set, e.g. ladder-unseen), each holding a ladder.json.
std::vector<std::string> ladder_folders(const fs::path& study_dir) {
  std::vector<std::string> folders;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(study_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if ((name == "ladder" || name.starts_with("ladder-")) && fs::is_regular_file(entry.path() / "ladder.json", ec))
      folders.push_back(name);
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

// Each ladder kept as results/<study>/ladder[-SET]/ladder.json (normlab study NAME --ladder ...): every sub-claim's
// trend over the rungs and the first rung where it holds, evidence beside the verdicts at the preset.
std::string ladders_section(const fs::path& results) {
  std::string rows;
  for (const Study* s : all_studies())
    for (const std::string& folder : ladder_folders(results / std::string(s->name))) {
      const Json ladder = parse_json_or_discarded(
          io::read_file(results / std::string(s->name) / folder / "ladder.json", "ladder report"));
      if (ladder.is_object()) rows += ladder_rows(s->name, folder, ladder);
    }
  if (rows.empty()) return rows;
  return "\n## Ladders: the trend toward the paper's scale\n\nEach ladder kept here ran the study's preset at every "
         "rung of one scale axis with the same seeds (docs/studies.md, \"Ladders\"): per sub-claim, the mean of its "
         "per-seed slopes over log(rung) with their 95% t interval (toward the claimed side: approaching the paper's "
         "regime; away: receding; across zero: flat), and the first rung at which it holds. Evidence beside the "
         "verdicts above, which it does not change.\n\n| study | rungs | sub-claim | trend | first holding rung "
         "|\n|---|---|---|---|---|\n" +
         rows;
}

// One sub-claim's per-seed values in a report, NaN where a seed is missing.
std::vector<double> per_seed_values(const Json& claim) {
  std::vector<double> v;
  for (const auto& [seed, value] : claim["per_seed"].items())
    v.push_back(value.is_number() ? value.get<double>() : NAN);
  return v;
}

// A set's cell: the effect and interval, or for a count the seeds on each side and the sign test's p.
std::string set_cell(const Json& claim) { return fmt::format("{} ({})", effect_of(claim), claim.value("outcome", "")); }

// Every seed of every set together, an estimate rather than a decision: the mean with its 95% t interval, or for a
// count the summed seeds on the claimed side and on the other, as each set's cell has them, with the sign test's p.
std::string pooled_text(const std::vector<double>& values, const Json& claim) {
  SeedValues all;
  for (size_t i = 0; i < values.size(); ++i) all.seeds.push_back(static_cast<int>(i)), all.values.push_back(values[i]);
  if (claim.contains("counts")) {
    const bool below = claim.value("side", "") == "below";
    const double threshold = below ? claim.value("hi", 0.0) : claim.value("lo", 0.0);
    int claimed = 0, reverse = 0;
    for (double v : values) {
      claimed += below ? v < threshold : v > threshold;
      reverse += below ? v > threshold : v < threshold;
    }
    return fmt::format("{} vs {} of {} seeds, p = {}", claimed, reverse, all.n(), num(sign_test_p(claimed, reverse)));
  }
  if (!all.complete() || all.n() < 2 || !std::isfinite(all.sd()))
    return fmt::format("{} ({} seeds)", num(all.mean()), all.n());
  const double n = static_cast<double>(all.n());
  const double half = student_t_quantile(0.975, static_cast<int>(all.n()) - 1) * all.sd() / std::sqrt(n);
  return fmt::format("{} [{}, {}] ({} seeds)", num(all.mean()), num(all.mean() - half), num(all.mean() + half),
                     all.n());
}

// The same sub-claim on every kept set of the default preset, the pooled estimate, and a flag where the sets'
// decisions disagree (one holds where another fails) or their intervals do not overlap.
std::string sets_section(const fs::path& results) {
  std::string rows;
  for (const Study* s : all_studies()) {
    const Kept k = kept_reports(results, s->name);
    const std::optional<ReportEntry>* sets[] = {&k.design, &k.fresh, &k.unseen};
    const std::optional<ReportEntry>& any = k.design ? k.design : k.fresh ? k.fresh : k.unseen;
    if (!any) continue;
    for (const Json& claim : any->json["sub_claims"]) {
      const std::string id = claim.value("id", "");
      std::vector<std::string> cells;
      std::vector<double> pooled;
      std::set<std::string> outcomes;
      double highest_lo = -INFINITY, lowest_hi = INFINITY;
      for (const auto* set : sets) {
        const Json* c = nullptr;
        if (*set)
          for (const Json& other : (**set).json["sub_claims"])
            if (other.value("id", "") == id) c = &other;
        if (!c) {
          cells.push_back("—");
          continue;
        }
        cells.push_back(set_cell(*c));
        for (double v : per_seed_values(*c)) pooled.push_back(v);
        outcomes.insert(c->value("outcome", ""));
        if ((*c)["interval"][0].is_number())
          highest_lo = std::max(highest_lo, (*c)["interval"][0].get<double>()),
          lowest_hi = std::min(lowest_hi, (*c)["interval"][1].get<double>());
      }
      const bool disagree = (outcomes.count("holds") && outcomes.count("fails")) || highest_lo > lowest_hi;
      rows += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", s->name, id, cells[0], cells[1], cells[2],
                          pooled_text(pooled, claim), disagree ? "**the sets disagree**" : "");
    }
  }
  return "\n## Each sub-claim on every seed set\n\nThe design, fresh and unseen sets side by side, each with its own "
         "decision, and all their seeds pooled (mean and 95% t interval over every seed, or for a count the seeds on "
         "the claimed side vs the other: an estimate, not a decision). A sub-claim is flagged where one set holds and "
         "another fails, or their intervals do not "
         "overlap.\n\n| study | sub-claim | design | fresh | unseen | pooled | |\n|---|---|---|---|---|---|---|\n" +
         rows;
}

}  // namespace

std::string findings_table(const fs::path& results, const std::string& link_prefix) {
  std::string md =
      "| study | claim | paper | design seeds | fresh seeds | unseen seeds | headline effect, design / fresh / unseen "
      "[interval] | model | core-hours |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const Study* s : all_studies()) {
    const Kept k = kept_reports(results, s->name);
    const auto effect = [](const std::optional<ReportEntry>& e) { return e ? effect_text(e->json) : "—"; };
    const std::optional<ReportEntry>& any = k.unseen ? k.unseen : k.fresh ? k.fresh : k.design;
    double hours = 0;
    for (const auto* e : {&k.design, &k.fresh, &k.unseen})
      if (*e) hours += (*e)->json.value("core_hours", 0.0);
    md += fmt::format("| [{}]({}{}/) | {} | {} | {} | {} | {} | {}: {} / {} / {} | {} | {} |\n", s->name, link_prefix,
                      s->name, md_cell(s->title), md_cell(paper_of(s->source)), cell(k.design), cell(k.fresh),
                      cell(k.unseen), any ? any->json.value("headline", "") : std::string("—"), effect(k.design),
                      effect(k.fresh), effect(k.unseen), any ? setting_text(any->json) : std::string("—"),
                      any ? fmt::format("{:.2f}", hours) : "—");
  }
  return md;
}

std::string findings_index(const fs::path& results) {
  std::string md =
      "# What the studies found\n\n"
      "Generated by `normlab study index results` from the `report.json` of each study kept here; do not edit by "
      "hand (a test regenerates it and compares). Each study ran its default preset on the design seeds (1, 2, 3 "
      "…, the pilots') and again, with nothing retuned, on the fresh seeds (101, 102, 103 …), and, where its "
      "pre-registration is frozen (`normlab study NAME --preregistration`; a commit says \"frozen NAME HASH\"), on "
      "the unseen seeds from 1001, every run made after the freeze. The fresh seeds predate freezing: some were "
      "looked at while presets were chosen. Seeds are `--seeds auto` (3, then 2 more at a time while a sub-claim is "
      "unclear, up to 8) unless a study plans a fixed number. A sub-claim holds when its interval (Student t over "
      "the seeds; a train-or-stall count: the exact sign test) lies wholly past its threshold, at the confidence "
      "Holm's step-down over the study's sub-claims and Bonferroni over the planned looks give it; see "
      "docs/studies.md for the rule and each study's regime.\n\n" +
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
  md += sets_section(results);
  md += not_reproduced_section(results);
  md += ladders_section(results);
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
