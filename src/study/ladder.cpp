#include "study/ladder.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <iostream>
#include <numeric>

#include "common/error.h"
#include "study/preregistration.h"

namespace normlab::study {

namespace fs = std::filesystem;

const char* const kWidthRule =
    "Adam's learning rate ∝ 1/width relative to the preset's (train.lr × preset d_model / d_model), heads and d_ff in "
    "the preset's ratios to d_model (the head size stays the preset's)";

namespace {

constexpr std::string_view kLadderAxes[] = {"train.steps", "model.n_layers", "model.d_model"};
constexpr int kMinRungs = 3;

// "model.n_layers=2,3,4" → the axis and its values, ascending; every malformed spec refused in one sentence.
std::pair<std::string, std::vector<int>> parse_spec(const std::string& spec) {
  const size_t eq = spec.find('=');
  const std::string axis = spec.substr(0, eq);
  if (eq == std::string::npos || eq == 0)
    fail(
        "--ladder {}: expected AXIS=V1,V2,V3 with AXIS train.steps, model.n_layers or model.d_model, e.g. --ladder "
        "model.n_layers=6,12,24",
        spec);
  if (std::find(std::begin(kLadderAxes), std::end(kLadderAxes), axis) == std::end(kLadderAxes))
    fail("--ladder {}: {} is not a scale axis a ladder climbs; choose train.steps, model.n_layers or model.d_model",
         spec, axis);
  std::vector<int> values;
  for (size_t start = eq + 1; start <= spec.size();) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string_view part = std::string_view(spec).substr(start, comma - start);
    int v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v <= 0)
      fail("--ladder {}: '{}' is not a positive whole number; give the rungs as whole numbers, e.g. {}=2,4,8", spec,
           part, axis);
    if (std::find(values.begin(), values.end(), v) != values.end())
      fail("--ladder {}: {} is given twice; give each rung once", spec, v);
    values.push_back(v);
    start = comma + 1;
  }
  if (values.size() < kMinRungs)
    fail("--ladder {}: a trend needs at least {} rungs and {} {} given; add rungs, e.g. {}=V1,V2,V3", spec, kMinRungs,
         values.size(), values.size() == 1 ? "is" : "are", axis);
  std::sort(values.begin(), values.end());
  return {axis, values};
}

// The ladder's other axes, "model.n_layers or model.d_model", for a message refusing `axis`.
std::string other_axes(const std::string& axis) {
  std::vector<std::string_view> others;
  for (const std::string_view a : kLadderAxes)
    if (a != axis) others.push_back(a);
  return fmt::format("{} or {}", others.front(), others.back());
}

// Whether plan_study refuses a --set of `field`: the study varies it (one of its axes sets it, or its arms differ in
// it). Asked of plan_study itself, so that which fields a study varies is decided in one place.
bool study_varies(const Study& study, StudyOptions options, const std::string& field, const Json& value) {
  options.overrides.push_back(fmt::format("{}={}", field, value.dump()));
  try {
    plan_study(study, options);
  } catch (const Error&) {
    return true;
  }
  return false;
}

// The preset's first run as the strict reader resolves it (a training run's, where the study trains), and whether
// any run trains.
std::pair<Json, bool> preset_config(const Study& study, StudyOptions options) {
  const std::vector<RunRequest> plan = plan_study(study, options);
  if (plan.empty()) fail("internal: study {} plans no runs", study.name);
  const auto train = std::find_if(plan.begin(), plan.end(), [](const RunRequest& r) { return r.kind == "train"; });
  const RunRequest& first = train == plan.end() ? plan.front() : *train;
  return {resolve_config(first.config, first.id), train != plan.end()};
}

// The study's own axis the ladder climbs (its key is the ladder's axis), or null.
const Axis* own_axis(const Study& study, const std::string& axis) {
  for (const Axis& a : study.axes)
    if (a.key == axis) return &a;
  return nullptr;
}

// Refuses an axis the ladder cannot move alone: one a study-level axis or the study's arms set, one --set also gives,
// or train.steps in a study that trains nothing. The study's own axis of that key is climbed by scaling its values.
void check_axis_is_free(const Study& study, const StudyOptions& base, const std::string& spec, const std::string& axis,
                        const Json& preset, bool trains) {
  for (const Axis& a : study.axes)
    if (a.sets == axis)
      fail(
          "--ladder {}: {} is set by study {}'s axis {}, so it varies within every rung; ladder {} instead, or change "
          "this axis's values with --grid {}=V1,V2,...",
          spec, axis, study.name, a.key, other_axes(axis), a.key);
  const std::vector<std::string> large = base.large ? large_overrides(study) : std::vector<std::string>{};
  for (const std::string& o : base.overrides)  // the --large preset's own sizes are what the rungs replace
    if (o.substr(0, o.find('=')) == axis && std::find(large.begin(), large.end(), o) == large.end())
      fail("--ladder {}: --set {} gives the field the ladder sets at each rung; drop that --set", spec, o);
  const Json::json_pointer at("/" + axis.substr(0, axis.find('.')) + "/" + axis.substr(axis.find('.') + 1));
  if (!own_axis(study, axis) && study_varies(study, base, axis, preset.at(at)))
    fail(
        "--ladder {}: study {} sets {} itself, differently between its runs, so one value per rung would mislabel its "
        "arms; ladder {} instead",
        spec, study.name, axis, other_axes(axis));
  if (axis == "train.steps" && !trains)
    fail(
        "--ladder {}: study {} trains nothing (its runs probe the model at init), so train.steps changes none of its "
        "numbers; ladder model.n_layers or model.d_model",
        spec, study.name);
}

// A field that follows a width rung: its preset value, its value at a width (whole only at multiples of `multiple`),
// and the rule in words.
struct Follower {
  std::string key;
  Json preset_value;
  int multiple;
  std::function<Json(int)> at;
  std::string rule;
};

// The width rule's overrides for every rung (kWidthRule); a field the study sets itself keeps the study's values, and
// the rules say so.
void follow_width(const Study& study, const StudyOptions& base, const std::string& spec, const Json& preset,
                  Ladder& ladder) {
  const int d0 = preset["model"]["d_model"].get<int>(), h0 = preset["model"]["n_heads"].get<int>();
  const int f0 = preset["model"]["d_ff"].get<int>(), head = d0 / h0;
  const double lr0 = preset["train"]["lr"].get<double>();
  const std::vector<Follower> followers = {
      {"model.n_heads", h0, head, [=](int d) { return Json(d / head); },
       fmt::format("model.n_heads = d_model / {} (the preset's head size: d_model {} / {} heads)", head, d0, h0)},
      {"model.d_ff", f0, d0 / std::gcd(f0, d0), [=](int d) { return Json(f0 * d / d0); },
       fmt::format("model.d_ff = d_model × {} / {} (the preset's ratio)", f0, d0)},
      {"train.lr", lr0, 1, [=](int d) { return Json(lr0 * d0 / d); },
       fmt::format("train.lr = {:g} × {} / d_model (Adam's lr ∝ 1/width)", lr0, d0)}};
  for (const Follower& f : followers) {
    if (study_varies(study, base, f.key, f.preset_value)) {
      ladder.rules.push_back(
          fmt::format("{}: set by study {} itself (an axis or its arms), not by the ladder", f.key, study.name));
      continue;
    }
    for (Rung& r : ladder.rungs) {
      if (r.value % f.multiple)
        fail("--ladder {}: width {} leaves {} = {} × {} / {} not whole; give widths that are multiples of {}", spec,
             r.value, f.key, f.preset_value.dump(), r.value, d0, f.multiple);
      r.overrides.push_back(fmt::format("{}={}", f.key, f.at(r.value).dump()));
    }
    ladder.rules.push_back(f.rule);
  }
}

// The study's own axis climbed: each rung's --grid holds the axis's values (the preset's or --grid's) scaled so that
// the largest is the rung, and the rule says so. Values that would not be whole are refused.
void scale_own_axis(const Study& study, const StudyOptions& base, const std::string& spec, Ladder& ladder) {
  StudyOptions planned = base;
  plan_study(study, planned);
  const std::vector<int> values = planned.int_axis(ladder.axis);
  const int largest = *std::max_element(values.begin(), values.end());
  int common = 0;
  for (const int v : values) common = std::gcd(common, v);
  const int multiple = largest / common;  // rung · v / largest is whole for every v exactly when multiple divides rung
  for (Rung& r : ladder.rungs) {
    if (r.value % multiple)
      fail(
          "--ladder {}: rung {} scales study {}'s {} values {} (largest {}) to values that are not whole; give rungs "
          "that are multiples of {}",
          spec, r.value, study.name, ladder.axis, fmt::join(values, ","), largest, multiple);
    std::vector<int> scaled;
    for (const int v : values) scaled.push_back(v * (r.value / multiple) / (largest / multiple));
    r.overrides.clear();  // the axis is the study's: --grid sets it, a --set of it would be refused
    r.grid = fmt::format("{}={}", ladder.axis, fmt::join(scaled, ","));
  }
  ladder.rules.push_back(
      fmt::format("{} is an axis of study {} ({}): each rung scales its values so that the largest is the rung (rung "
                  "R: {} × R / {})",
                  ladder.axis, study.name, fmt::join(values, ", "), fmt::join(values, ", "), largest));
}

}  // namespace

Ladder plan_ladder(const Study& study, const StudyOptions& base, const std::string& spec) {
  const auto [axis, values] = parse_spec(spec);
  const auto [preset, trains] = preset_config(study, base);
  check_axis_is_free(study, base, spec, axis, preset, trains);
  Ladder ladder{axis, {}, {}};
  for (const int v : values)
    ladder.rungs.push_back({.value = v,
                            .overrides = {fmt::format("{}={}", axis, v)},
                            .dir = base.dir / fmt::format("rung-{}-{}", axis, v)});
  if (own_axis(study, axis)) scale_own_axis(study, base, spec, ladder);
  else if (axis == "model.d_model") follow_width(study, base, spec, preset, ladder);
  return ladder;
}

void choose_ladder_seeds(StudyOptions& options, const std::string& seeds_text) {
  if (seeds_text == "auto" || seeds_text.starts_with("auto:"))
    fail(
        "--seeds {}: a ladder looks once per rung with the same seeds at every rung; give a fixed list such as "
        "--seeds 1,2,3 (the default)",
        seeds_text);
  choose_seeds(options, seeds_text.empty() ? "1,2,3" : seeds_text, options.max_seeds);
  if (options.seeds.size() < 2)
    fail("--seeds {}: a ladder's slope interval needs at least 2 seeds; give --seeds 3, or leave --seeds out for 1,2,3",
         seeds_text);
}

const char* direction_name(Direction direction) {
  switch (direction) {
    case Direction::approaching:
      return "approaching the paper's regime";
    case Direction::receding:
      return "receding";
    case Direction::flat:
      return "flat";
    case Direction::undecided:
      break;
  }
  return "undecided";
}

std::string Trend::text() const {
  if (std::isnan(lo))
    return fmt::format("slope of {} over log(rung), per seed: {}; no interval: undecided", fitted, slopes.show());
  return fmt::format("slope of {} over log(rung), per seed: {}; interval [{}, {}] ({:g}%): {}", fitted, slopes.show(),
                     num(lo), num(hi), 100 * confidence, direction_name(direction));
}

namespace {

// A seed's value among `values` (NaN if it has none).
double value_of(const SeedValues& values, int seed) {
  const auto it = std::find(values.seeds.begin(), values.seeds.end(), seed);
  return it == values.seeds.end() ? NAN : values.values[static_cast<size_t>(it - values.seeds.begin())];
}

}  // namespace

Trend trend_of(const std::vector<double>& rungs, const std::vector<SeedValues>& per_rung, SubClaim::Side side,
               double lo, double hi, double confidence) {
  const bool within = side == SubClaim::Side::within;
  const double centre = (lo + hi) / 2;
  Trend t;
  t.confidence = confidence;
  t.fitted = within ? fmt::format("the distance |effect − {}| to the band's centre", num(centre)) : "the effect";
  std::vector<double> x;
  for (const double r : rungs) x.push_back(std::log(r));
  t.slopes.seeds = per_rung.empty() ? std::vector<int>{} : per_rung.front().seeds;
  for (const int seed : t.slopes.seeds) {
    std::vector<double> y;
    for (const SeedValues& v : per_rung) y.push_back(within ? std::abs(value_of(v, seed) - centre) : value_of(v, seed));
    t.slopes.values.push_back(x.size() == y.size() ? least_squares_slope(x, y) : NAN);
  }
  const size_t n = t.slopes.n();
  if (n < 2 || !t.slopes.complete() || std::isnan(t.slopes.sd())) return t;
  const double half = student_t_quantile(1 - (1 - confidence) / 2, static_cast<int>(n) - 1) * t.slopes.sd() /
                      std::sqrt(static_cast<double>(n));
  t.lo = t.slopes.mean() - half, t.hi = t.slopes.mean() + half;
  // Toward the claimed side: a growing effect for "above"; a shrinking effect ("below") or distance ("within").
  const bool up_is_toward = side == SubClaim::Side::above;
  if (t.lo > 0 || t.hi < 0) t.direction = (t.lo > 0) == up_is_toward ? Direction::approaching : Direction::receding;
  else t.direction = Direction::flat;
  return t;
}

namespace {

// The trend rule in one sentence, for the report and ladder.json.
constexpr const char* kTrendRule =
    "Trend: for each seed, the least-squares slope of the sub-claim's effect over log(rung) across the rungs (for a "
    "band, of the distance to the band's centre); then the Student-t interval of the mean slope over the seeds (95%, "
    "per sub-claim). An interval wholly toward the claimed side (above: positive; below: negative; within a band: a "
    "shrinking distance, negative) reads \"approaching the paper's regime\", wholly the other way \"receding\", one "
    "that holds 0 \"flat\". It describes this ladder and changes no verdict.";

// A sub-claim at each rung, by id (nullptr where a rung's study lacks it).
std::vector<const SubClaim*> across_rungs(const std::vector<StudyResult>& rungs, const std::string& id) {
  std::vector<const SubClaim*> at;
  for (const StudyResult& r : rungs) {
    const auto it = std::find_if(r.claims.begin(), r.claims.end(), [&](const SubClaim& c) { return c.id == id; });
    at.push_back(it == r.claims.end() ? nullptr : &*it);
  }
  return at;
}

std::vector<double> rung_values(const Ladder& ladder) {
  std::vector<double> x;
  for (const Rung& r : ladder.rungs) x.push_back(r.value);
  return x;
}

const char* truth_word(const SubClaim* c) {
  if (!c) return "missing";
  return c->truth == Truth::holds ? "holds" : c->truth == Truth::fails ? "fails" : "unclear";
}

// The effect per seed, the mean (labelled with each rung's outcome), the interval and the threshold against the rung
// (a log x axis for steps and width).
Chart effect_chart(const Ladder& ladder, const SubClaim& first, const std::vector<const SubClaim*>& at) {
  Chart chart{fmt::format("{}: {} against {}", first.id, first.statistic, ladder.axis), ladder.axis, first.statistic};
  chart.log_x = ladder.axis != "model.n_layers";
  const std::vector<double> x = rung_values(ladder);
  const auto series = [&](const std::string& label, const std::function<double(const SubClaim&)>& y) {
    Series s{label, x, {}};
    for (const SubClaim* c : at) s.y.push_back(c ? y(*c) : NAN);
    chart.series.push_back(s);
  };
  std::vector<std::string> outcomes;
  for (size_t i = 0; i < at.size(); ++i)
    outcomes.push_back(fmt::format("{}: {}", ladder.rungs[i].value, truth_word(at[i])));
  for (const int seed : first.values.seeds)
    series(fmt::format("seed {}", seed), [&](const SubClaim& c) { return value_of(c.values, seed); });
  series(fmt::format("mean ({})", fmt::join(outcomes, ", ")), [](const SubClaim& c) { return c.values.mean(); });
  series("interval low", [](const SubClaim& c) { return c.interval_lo; });
  series("interval high", [](const SubClaim& c) { return c.interval_hi; });
  if (first.side != SubClaim::Side::below) series("threshold (low)", [](const SubClaim& c) { return c.lo; });
  if (first.side != SubClaim::Side::above) series("threshold (high)", [](const SubClaim& c) { return c.hi; });
  return chart;
}

// Rung, mean, interval and outcome of a sub-claim at each rung, coloured by outcome.
Table rung_table(const Ladder& ladder, const SubClaim& first, const std::vector<const SubClaim*>& at) {
  Table t{fmt::format("{}. {} ({}, holds when {})", first.id, first.statement, first.statistic, first.threshold()),
          {ladder.axis, "mean ± sd", "interval", "outcome"}};
  for (size_t i = 0; i < at.size(); ++i) {
    const std::string rung = std::to_string(ladder.rungs[i].value);
    if (at[i]) t.rows.push_back({rung, at[i]->values.show(), at[i]->interval(), at[i]->outcome()});
    else t.rows.push_back({rung, "n/a", "n/a", "not in this rung's report"});
    t.row_class.push_back(at[i] ? truth_word(at[i]) : "undecided");
  }
  return t;
}

// The first rung at which the sub-claim holds (0: none).
int first_holding(const Ladder& ladder, const std::vector<const SubClaim*>& at) {
  for (size_t i = 0; i < at.size(); ++i)
    if (at[i] && at[i]->truth == Truth::holds) return ladder.rungs[i].value;
  return 0;
}

Json trend_json(const Trend& t) {
  const auto number = [](double v) { return std::isfinite(v) ? Json(v) : Json(); };
  Json slopes = Json::object();
  for (size_t i = 0; i < t.slopes.n(); ++i) slopes[std::to_string(t.slopes.seeds[i])] = number(t.slopes.values[i]);
  return {{"fitted", t.fitted},
          {"per_seed_slope", slopes},
          {"mean", number(t.slopes.mean())},
          {"interval", {number(t.lo), number(t.hi)}},
          {"confidence", t.confidence},
          {"direction", direction_name(t.direction)}};
}

// The sub-claim as the ladder names it: its first rung's, except that a statement or statistic that changes with the
// rung (a study's own axis climbed: "6-layer Post-LN" at rung 6, "24-layer" at 24) is the top rung's, marked so.
SubClaim as_named(const SubClaim& first, const std::vector<const SubClaim*>& at) {
  SubClaim named = first;
  const SubClaim* top = at.empty() ? nullptr : at.back();
  if (!top) return named;
  constexpr const char* kMark = " (as at the top rung; each rung's report states its own)";
  if (top->statement != first.statement) named.statement = top->statement + kMark;
  if (top->statistic != first.statistic) named.statistic = top->statistic + kMark;
  return named;
}

// One sub-claim's chart, table, trend row, evidence line and ladder.json entry.
void add_sub_claim(const Ladder& ladder, const std::vector<StudyResult>& rungs, const SubClaim& first_rung,
                   Report& report, Table& trends) {
  const std::vector<const SubClaim*> at = across_rungs(rungs, first_rung.id);
  const SubClaim first = as_named(first_rung, at);
  std::vector<SeedValues> per_rung;
  Json json_rungs = Json::array();
  for (size_t i = 0; i < at.size(); ++i) {
    per_rung.push_back(at[i] ? at[i]->values : SeedValues{first.values.seeds, {}});
    Json entry = at[i] ? sub_claim_json(*at[i]) : Json::object();
    entry["rung"] = ladder.rungs[i].value;
    json_rungs.push_back(entry);
  }
  const Trend trend = trend_of(rung_values(ladder), per_rung, first.side, first.lo, first.hi);
  const int holds_at = first_holding(ladder, at);
  const std::string first_text =
      holds_at ? fmt::format("holds first at {}={}", ladder.axis, holds_at) : std::string("holds at no rung");
  report.charts.push_back(effect_chart(ladder, first, at));
  report.tables.push_back(rung_table(ladder, first, at));
  trends.rows.push_back({first.id, first.threshold(),
                         std::isnan(trend.lo) ? "n/a" : fmt::format("[{}, {}]", num(trend.lo), num(trend.hi)),
                         direction_name(trend.direction), holds_at ? std::to_string(holds_at) : "none"});
  report.evidence.push_back(fmt::format("{} ({}): {}; {}", first.id, first.statement, trend.text(), first_text));
  report.record["sub_claims"].push_back({{"id", first.id},
                                         {"statement", first.statement},
                                         {"statistic", first.statistic},
                                         {"threshold", first.threshold()},
                                         {"per_rung", json_rungs},
                                         {"trend", trend_json(trend)},
                                         {"first_holding_rung", holds_at ? Json(holds_at) : Json()}});
}

// The ladder in words: the preset, the rungs and how they are made, the seeds and what the ladder does not change.
std::string ladder_setup(const Study& study, const StudyOptions& base, const Ladder& ladder) {
  std::vector<int> values;
  for (const Rung& r : ladder.rungs) values.push_back(r.value);
  const bool own = !ladder.rungs.empty() && !ladder.rungs.front().grid.empty();
  std::string rules;
  if (own) rules = fmt::format(" Axis rule: {}.", fmt::join(ladder.rules, "; "));
  else if (!ladder.rules.empty())
    rules = fmt::format(" Width rule: {}. Here: {}.", kWidthRule, fmt::join(ladder.rules, "; "));
  return fmt::format(
      "Study {}'s {} preset, run once per rung of {} ∈ {{{}}}: each rung a study of its own ({}, in folder "
      "rung-{}-V with its own report), with seeds {} at every rung and one look per rung (each rung judged by the "
      "study's own rule).{}{} The study's verdict at its preset stands in its own report; this ladder does not "
      "change it.",
      study.name,
      base.quick   ? "--quick"
      : base.large ? "--large"
                   : "default",
      ladder.axis, fmt::join(values, ", "),
      own ? "--grid " + ladder.axis + " scaled to the rung" : "--set " + ladder.axis + "=V", ladder.axis,
      describe_seeds(base.seeds), rules,
      base.claims.empty() ? std::string()
                          : fmt::format(" It follows only sub-claim{} {} (--claims): only the arms {} run at "
                                        "each rung, and each rung's report shows the others as not followed.",
                                        base.claims.size() == 1 ? "" : "s", fmt::join(base.claims, ", "),
                                        base.claims.size() == 1 ? "it reads" : "they read"));
}

// Each rung's verdict, linked to its report, in the report's table and in ladder.json.
Table rung_verdicts(const Ladder& ladder, const std::vector<StudyResult>& rungs, Report& r) {
  Table verdicts{"Each rung's verdict (a study of its own: open its report)", {ladder.axis, "verdict", "report"}};
  r.run_dirs_heading = "Rungs";
  r.run_dirs_are = "studies, each with its own report and runs (rung-" + ladder.axis + "-V/report.html)";
  for (size_t i = 0; i < rungs.size() && i < ladder.rungs.size(); ++i) {
    const std::string report = (ladder.rungs[i].dir.filename() / "report.html").string();
    verdicts.rows.push_back({std::to_string(ladder.rungs[i].value), rungs[i].verdict, report});
    r.run_dirs.push_back(report);
    r.record["rungs"].push_back({{"value", ladder.rungs[i].value},
                                 {"overrides", ladder.rungs[i].overrides},
                                 {"grid", ladder.rungs[i].grid},
                                 {"verdict", rungs[i].verdict},
                                 {"report", report}});
  }
  return verdicts;
}

}  // namespace

Report ladder_report(const Study& study, const StudyOptions& base, const Ladder& ladder,
                     const std::vector<StudyResult>& rungs) {
  Report r;
  r.name = std::string(study.name);
  r.title = fmt::format("Ladder: study {} over {}", study.name, ladder.axis);
  r.claim = study.claim, r.source = study.source, r.paper_setting = std::string(study.paper_setting);
  r.setup = ladder_setup(study, base, ladder);
  r.evidence.push_back(kTrendRule);
  r.record = {{"ladder", true},         {"study", std::string(study.name)}, {"axis", ladder.axis},
              {"rules", ladder.rules},  {"trend_rule", kTrendRule},         {"seeds", base.seeds},
              {"rungs", Json::array()}, {"sub_claims", Json::array()},      {"followed", base.claims}};
  const Table verdicts = rung_verdicts(ladder, rungs, r);
  Table trends{"Trends (slope over log(rung), per seed; interval over the seeds, 95%)",
               {"sub-claim", "holds when", "slope interval", "trend", "first rung where it holds"}};
  if (!rungs.empty())
    for (const SubClaim& c : rungs.front().claims)
      if (base.follows(c.id)) add_sub_claim(ladder, rungs, c, r, trends);
  r.tables.insert(r.tables.begin(), {verdicts, trends});
  r.provenance = {"command: " + (base.command_line.empty() ? std::string("(not recorded)") : base.command_line),
                  "normlab: " + source_version() + " (the commit the binary was built from)",
                  "each rung's report records its runs, corpus, threads and seeds (Reproduce)"};
  return r;
}

namespace {

// The options that make one rung: the base's, then the rung's --set (after the user's, so they win) or its --grid in
// place of the user's of the same axis, in the rung's folder.
StudyOptions rung_options(const StudyOptions& base, const Ladder& ladder, const Rung& rung) {
  StudyOptions options = base;
  options.overrides.insert(options.overrides.end(), rung.overrides.begin(), rung.overrides.end());
  if (!rung.grid.empty()) {  // replaces the user's --grid of the same axis
    std::erase_if(options.grid, [&](const std::string& g) { return g.substr(0, g.find('=')) == ladder.axis; });
    options.grid.push_back(rung.grid);
  }
  options.dir = rung.dir;
  return options;
}

// How a rung is made, as the command line would say it: "train.steps=1200" or "--grid model.n_layers=3,6".
std::string rung_setting(const Rung& rung) {
  return rung.grid.empty() ? fmt::format("{}", fmt::join(rung.overrides, " ")) : "--grid " + rung.grid;
}

}  // namespace

std::string ladder_preregistration_text(const Study& study, const StudyOptions& base, const Ladder& ladder) {
  std::string text;
  for (const Rung& rung : ladder.rungs) {
    const StudyOptions options = rung_options(base, ladder, rung);
    text += fmt::format("## rung {}={} ({})\n{}\n", ladder.axis, rung.value, rung_setting(rung),
                        preregistration_text(study, options));
  }
  return text;
}

LadderResult run_ladder(const Study& study, const StudyOptions& base, const Ladder& ladder,
                        const RunnerOptions& runner) {
  LadderResult out;
  for (const Rung& rung : ladder.rungs) {
    std::cerr << fmt::format("ladder: {}={} ({}) in {}\n", ladder.axis, rung.value, rung_setting(rung),
                             rung.dir.string());
    out.rungs.push_back(run_study(study, rung_options(base, ladder, rung), runner));
  }
  const Report report = ladder_report(study, base, ladder, out.rungs);
  out.html = write_report(base.dir, report, "ladder");
  out.trends = report.evidence;
  return out;
}

}  // namespace normlab::study
