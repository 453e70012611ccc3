#include "study/studies.h"

#include "probe/records.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "common/error.h"
#include "dist/comm.h"
#include "model/config.h"
#include "study/kit.h"
#include "study/preregistration.h"
#include "study/studies/catalog.h"
#include "train/records.h"

namespace normlab::study {

namespace fs = std::filesystem;

namespace {
const std::array kStudies = {
    &kWhyPreLn,      &kGradByDepth,     &kStreamAtInit, &kWarmupGrid,     &kModelUpdate,        &kOneStep,
    &kDepthVariance, &kLayerImportance, &kGradBalance,  &kRmsEquivalence, &kMassiveActivations, &kDytAlpha,
    &kLeaderboard,   &kBertWarmup,      &kMtDepth,
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

void choose_seeds(StudyOptions& o, const std::string& text, int max_seeds) {
  if (max_seeds < SeedSchedule::kStart || max_seeds > 1000)
    fail("--max-seeds {}: the cap of --seeds auto must be between {} and 1000", max_seeds, SeedSchedule::kStart);
  o.max_seeds = max_seeds;
  const bool given = !text.empty();
  o.auto_seeds = given ? text == "auto" || text.starts_with("auto:") : !o.quick && !o.large;
  if (!o.auto_seeds) {
    o.seeds = given ? parse_seeds(text) : parse_seeds(o.quick ? "1" : "3");
    o.schedule = {};
    return;
  }
  o.first_seed = 1;
  if (text.starts_with("auto:")) {
    const std::string first = text.substr(5);
    if (first.empty() || first.size() > 9 ||
        !std::all_of(first.begin(), first.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
        std::stoi(first) == 0)
      fail("--seeds {}: expected auto:FIRST with FIRST a positive whole number, e.g. auto:101 for the fresh seeds",
           text);
    o.first_seed = std::stoi(first);
  }
  o.schedule = SeedSchedule::automatic(max_seeds);
  o.seeds.clear();
  for (int k = 0; k < SeedSchedule::kStart; ++k) o.seeds.push_back(o.first_seed + k);
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

// "a,b,c" → {"a", "b", "c"} (an empty text: no values).
std::vector<std::string> split_values(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', start);
    out.emplace_back(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// A value as --set reads it (JSON if it parses, else text).
Json parse_value(const std::string& text) {
  Json doc = Json::object();
  apply_override(doc, "v=" + text);
  return doc["v"];
}

std::string axis_keys(const Study& study) {
  std::vector<std::string> keys;
  for (const Axis& a : study.axes) keys.emplace_back(a.key);
  return keys.empty() ? std::string("none, its arms are fixed") : fmt::format("{}", fmt::join(keys, ", "));
}

// The fields of a config as dotted keys with their values as text.
void flatten(const Json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out[prefix] = j.is_string() ? j.get<std::string>() : j.dump();
}

// Refuses a --set of a field the study varies: an axis (use --grid), or a field that tells its arms apart
// (one value for every run would leave the arms' labels wrong).
void check_override_collisions(const Study& study, const std::vector<RunRequest>& requests,
                               const std::vector<std::string>& overrides) {
  const auto covers = [](const std::string& key, std::string_view field) {
    return !field.empty() && (field == key || std::string_view(field).starts_with(key + "."));
  };
  // Per kind of run (a probe's train.steps is not a training run's), the values each field takes.
  std::map<std::string, std::map<std::string, std::set<std::string>>> values;
  std::map<std::string, size_t> runs_of_kind;
  for (const RunRequest& r : requests) {
    std::map<std::string, std::string> flat;
    flatten(r.config, "", flat);
    ++runs_of_kind[r.kind];
    for (const auto& [k, v] : flat) values[r.kind][k].insert(v);
  }
  for (const std::string& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    for (const Axis& a : study.axes)
      if (covers(key, a.key) || covers(key, a.sets))
        fail(
            "--set {}: {} is an axis of study {} ({}); change its values with --grid {}=V1,V2,... instead; nothing "
            "was run",
            o, key, study.name, a.description, a.key);
    if (key == "train.seed") continue;  // the seeds' own field (--seeds)
    // Named members, not structured bindings: clang 14 (the fuzz build) cannot capture those in a lambda.
    for (const auto& kind_fields : values)
      for (const auto& field_seen : kind_fields.second) {
        const auto& kind = kind_fields.first;
        const auto& field = field_seen.first;
        const auto& seen = field_seen.second;
        // A field some runs of the kind lack varies too.
        const size_t present = std::count_if(requests.begin(), requests.end(), [&](const RunRequest& r) {
          std::string pointer = "/" + field;
          std::replace(pointer.begin(), pointer.end(), '.', '/');
          return r.kind == kind && r.config.contains(Json::json_pointer(pointer));
        });
        if (covers(key, field) && (seen.size() > 1 || present != runs_of_kind[kind]))
          fail(
              "--set {}: study {} varies {} between its runs ({}), so one value for every run would leave its arms "
              "labelled with values they do not have; refused, nothing was run (its grid axes: {}; `normlab study "
              "{} --help`)",
              o, study.name, field,
              fmt::format("{}{}", fmt::join(seen, ", "), present != runs_of_kind[kind] ? "; unset in some" : ""),
              axis_keys(study), study.name);
      }
  }
}

std::vector<std::string> provenance(const StudyOptions& o, const RunnerOptions& runner,
                                    const std::vector<RunOutcome>& runs) {
  std::vector<std::string> lines = {
      "command: " + (o.command_line.empty() ? std::string("(not recorded)") : o.command_line),
      fmt::format("overrides (--set, applied to every run): {}",
                  o.overrides.empty() ? "none" : fmt::format("{}", fmt::join(o.overrides, " "))),
      fmt::format("grid (--grid, replacing an axis's values): {}",
                  o.grid.empty() ? "none (the preset's)" : fmt::format("{}", fmt::join(o.grid, " "))),
      "normlab: " + source_version() + " (the commit the binary was built from)",
  };
  lines.push_back(runs_made_by(runs));
  std::set<std::string> corpora;
  for (const RunOutcome& r : runs) {
    const std::string dir = r.config["data"]["dir"].get<std::string>();
    if (corpora.insert(dir).second)
      lines.push_back(fmt::format("corpus: {} (meta.json fnv1a64 {})", dir, corpus_checksum(dir)));
  }
  const int jobs = std::max(1, runner.jobs);
  const int ranks = dist::world().size();
  lines.push_back(fmt::format(
      "threads: {} cores, {} run(s) at once, {} thread(s) per process{}{}", runner.threads, jobs,
      threads_per_process(runner), ranks > 1 ? fmt::format(", on each of {} MPI ranks", ranks) : std::string(),
      runner.ranks_per_run > 1 ? fmt::format(", each run data-parallel over {} processes", runner.ranks_per_run)
                               : std::string()));
  lines.push_back(fmt::format("seeds: {} ({} per configuration)", describe_seeds(o.seeds), o.seeds.size()));
  lines.push_back(
      "the same command with the same --out reuses every finished run whose request.json equals the plan's; "
      "--fresh runs them all again");
  return lines;
}

}  // namespace

const std::vector<Json>& StudyOptions::axis(const std::string& key) const {
  const auto it = axes.find(key);
  if (it == axes.end()) fail("internal: the study has no axis {} (or plan_study did not resolve its axes)", key);
  return it->second;
}

std::vector<int> StudyOptions::int_axis(const std::string& key) const {
  std::vector<int> out;
  for (const Json& v : axis(key)) out.push_back(v.get<int>());
  return out;
}

std::vector<double> StudyOptions::number_axis(const std::string& key) const {
  std::vector<double> out;
  for (const Json& v : axis(key)) out.push_back(v.get<double>());
  return out;
}

bool StudyOptions::follows(const std::string& claim_id) const {
  return claims.empty() || std::find(claims.begin(), claims.end(), claim_id) != claims.end();
}

std::vector<std::string> StudyOptions::text_axis(const std::string& key) const {
  std::vector<std::string> out;
  for (const Json& v : axis(key)) out.push_back(v.get<std::string>());
  return out;
}

void resolve_axes(const Study& study, StudyOptions& options) {
  options.axes.clear();
  for (const Axis& a : study.axes)
    for (const std::string& v : split_values(options.quick                       ? a.quick
                                             : options.large && !a.large.empty() ? a.large
                                                                                 : a.defaults))
      options.axes[std::string(a.key)].push_back(parse_value(v));
  std::set<std::string> given;
  for (const std::string& g : options.grid) {
    const size_t eq = g.find('=');
    const std::string key = g.substr(0, eq);
    const Axis* axis = nullptr;
    for (const Axis& a : study.axes)
      if (a.key == key) axis = &a;
    if (eq == std::string::npos || eq == 0)
      fail("--grid {}: expected KEY=V1,V2,... (study {}'s axes: {}); nothing was run", g, study.name, axis_keys(study));
    if (!axis)
      fail("--grid {}: {} is not an axis of study {} (its axes: {}; `normlab study {} --help`); nothing was run", g,
           key, study.name, axis_keys(study), study.name);
    if (!given.insert(key).second) fail("--grid {}: {} is given twice; nothing was run", g, key);
    const Json example = parse_value(split_values(axis->defaults).front());
    std::vector<Json> values;
    for (const std::string& text : split_values(std::string_view(g).substr(eq + 1))) {
      const Json v = parse_value(text);
      const bool ok = example.is_number_integer() ? v.is_number_integer()
                      : example.is_number()       ? v.is_number()
                      : example.is_string()       ? v.is_string()
                                                  : v.type() == example.type();
      if (!ok || text.empty())
        fail("--grid {}: {}: expected {} like the preset's ({}), not \"{}\"; nothing was run", g, key,
             example.is_number_integer() ? "integers"
             : example.is_number()       ? "numbers"
                                         : "names",
             axis->defaults, text);
      const auto choices = split_values(axis->choices);
      if (!choices.empty() && std::find(choices.begin(), choices.end(), text) == choices.end())
        fail("--grid {}: {}: \"{}\" is not one of {}; nothing was run", g, key, text, axis->choices);
      if (std::find(values.begin(), values.end(), v) != values.end())
        fail("--grid {}: {}: {} is given twice; nothing was run", g, key, text);
      values.push_back(v);
    }
    if (values.empty()) fail("--grid {}: {} needs at least one value; nothing was run", g, key);
    options.axes[key] = values;
  }
}

std::string study_help(const Study& s) {
  const std::string by_default =
      s.default_seeds.empty() ? "auto by default: 3 seeds, then 2 more at a time while a sub-claim is unclear, up to "
                                "--max-seeds (" +
                                    std::to_string(SeedSchedule::kDefaultCap) + ")"
                              : fmt::format("{} by default, one look (its counts need them)", s.default_seeds);
  std::string out = fmt::format(
      "normlab study {}: {}\n\nclaim:  {}\nsource: {}\ncost:   {}\nseeds:  {}; --seeds auto:{} starts at seed {} "
      "(the unseen seeds, after freezing: --preregistration); a fixed --seeds N, 1001,1002 or 1001-1010 looks once "
      "(--quick: 1 seed, --large: 3)\n\n",
      s.name, s.title, s.claim, s.source, s.cost, by_default, kFirstUnseenSeed, kFirstUnseenSeed);
  StudyOptions preset;
  std::vector<RunOutcome> planned_runs;
  for (const RunRequest& r : plan_study(s, preset))
    planned_runs.push_back({.request = r, .config = resolve_config(r.config, r.id)});
  out += fmt::format("the paper's setting: {}\nthis preset ({} runs at 3 seeds): {}\n\n",
                     s.paper_setting.empty() ? std::string_view("(not stated)") : s.paper_setting, planned_runs.size(),
                     config_summary(planned_runs, {}));
  out += "sub-claims (at this preset; each holds when its interval over the seeds lies past its threshold):\n";
  for (const ClaimSpec& spec : s.sub_claims)
    out += fmt::format("  {}\n", claim_rule(spec, s.arms, study_variables(s, preset)));
  out += "\n";
  StudyOptions large;
  use_large_preset(s, large);
  const std::vector<RunRequest> planned = plan_study(s, large);
  out += fmt::format(
      "large:  --large sets {}; {} runs with {} seeds, {} layer-steps of training (steps × layers; docs/studies.md "
      "prices them in core-hours)\n\n",
      fmt::join(large_overrides(s), " "), planned.size(), large.seeds.size(), layer_steps(planned));
  if (s.axes.empty()) {
    out +=
        "axes: none; its arms are fixed. --set changes what every run shares (a field the arms differ in is "
        "refused).\n";
  } else {
    out += "axes (replace an axis's values with --grid KEY=V1,V2,...; a --set of an axis is refused):\n";
    for (const Axis& a : s.axes) {
      out += fmt::format("  {}\n      {}\n      default: {}   --quick: {}   --large: {}\n", a.key, a.description,
                         a.defaults, a.quick, a.large.empty() ? a.defaults : a.large);
      if (!a.choices.empty()) out += fmt::format("      values: {}\n", a.choices);
    }
  }
  out += fmt::format(
      "\nexamples:\n  normlab study {0}                          # the default preset\n"
      "  normlab study {0} --quick                  # the small preset\n"
      "  mpirun -np 8 normlab study {0} --large     # the cluster-sized preset (docs/scaling.md)\n"
      "  normlab study {0} --set model.d_model=96   # another model size; arms follow it\n",
      s.name);
  if (!s.axes.empty()) {
    const Axis& a = s.axes.front();
    out += fmt::format("  normlab study {} --grid {}={}\n", s.name, a.key,
                       a.quick != a.defaults ? a.quick : std::string_view("V1,V2,..."));
  }
  return out;
}

std::vector<std::string> large_overrides(const Study& study) {
  std::vector<std::string> overrides = {"model.d_model=256", "model.n_heads=4"};
  if (study.large_size != LargeSize::without_ffn) overrides.emplace_back("model.d_ff=1024");
  if (study.large_size != LargeSize::without_context)
    overrides.insert(overrides.end(), {"model.max_seq_len=128", "train.seq_len=128"});
  for (size_t at = 0; at < study.large.size();) {
    const size_t space = std::min(study.large.find(' ', at), study.large.size());
    if (space > at) overrides.emplace_back(study.large.substr(at, space - at));
    at = space + 1;
  }
  return overrides;
}

void use_large_preset(const Study& study, StudyOptions& options) {
  if (options.quick) fail("study {}: --large and --quick are two presets; choose one", study.name);
  std::vector<std::string> overrides = large_overrides(study);
  overrides.insert(overrides.end(), options.overrides.begin(), options.overrides.end());
  options.overrides = std::move(overrides);
  options.large = true;
}

long long layer_steps(const std::vector<RunRequest>& requests) {
  long long total = 0;
  for (const RunRequest& r : requests) {
    if (r.kind != "train") continue;
    const Json c = resolve_config(r.config, r.id);
    const model::ModelConfig m = model::read_model_config(c["model"], r.id);
    total += static_cast<long long>(c["train"]["steps"].get<int>()) *
             (m.n_layers + (m.encoder_decoder() ? m.source_layers() : 0));
  }
  return total;
}

int checkpoint_interval(int steps) { return std::clamp(steps / 4, 1, 100); }

namespace {

// --claims: fails naming the study's sub-claims on an id it lacks; keeps only the runs of the arms the named
// sub-claims read (arms_read), so a ladder following one sub-claim trains nothing it does not measure.
void keep_followed_arms(const Study& study, const StudyOptions& options, std::vector<RunRequest>& requests) {
  if (options.claims.empty()) return;
  const Json variables = study_variables(study, options);
  std::vector<std::string> ids, arms;
  for (const ClaimSpec& spec : study.sub_claims) ids.push_back(spec.id);
  for (const std::string& id : options.claims) {
    const auto spec =
        std::find_if(study.sub_claims.begin(), study.sub_claims.end(), [&](const ClaimSpec& c) { return c.id == id; });
    if (spec == study.sub_claims.end())
      fail("--claims {}: study {} has no sub-claim {}; its sub-claims are {}", fmt::join(options.claims, ","),
           study.name, id, fmt::join(ids, ", "));
    for (const std::string& arm : arms_read(*spec, variables)) arms.push_back(arm);
  }
  std::set<std::string> kept;
  for (const std::string& arm : arms)
    for (int seed : options.seeds) kept.insert(seed_id(arm, seed));
  std::erase_if(requests, [&](const RunRequest& r) { return !kept.contains(r.id); });
}

}  // namespace

std::vector<RunRequest> plan_study(const Study& study, StudyOptions& options) {
  if (options.seeds.empty()) choose_seeds(options, "", options.max_seeds);
  resolve_axes(study, options);
  std::vector<RunRequest> requests = study.plan(options);
  // What the user gave, to name in an error about a run's config.
  std::vector<std::string> given;
  for (const auto& o : options.overrides) given.push_back("--set " + o);
  for (const auto& g : options.grid) given.push_back("--grid " + g);
  if (!requests.empty()) {
    Json fields;
    try {
      fields = resolve_config(requests.front().config, fmt::format("study {}", study.name));
    } catch (const Error& e) {
      if (options.grid.empty()) throw;
      fail("{}: {} (run {}); nothing was run", fmt::join(given, " "), e.what(), requests.front().id);
    }
    for (const auto& o : options.overrides) check_override_key(fields, o);
  }
  const std::vector<RunRequest> planned = requests;
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
      fail("{}: {} (run {}); nothing was run", fmt::join(given, " "), e.what(), r.id);
    }
  }
  check_override_collisions(study, planned, options.overrides);  // over every arm: --claims frees no field
  keep_followed_arms(study, options, requests);
  return requests;
}

Json study_variables(const Study& study, const StudyOptions& options) {
  return study.variables ? study.variables(options) : Json::object();
}

std::string sub_claims_rule(const Study& study, const StudyOptions& options) {
  const Json variables = study_variables(study, options);
  std::vector<std::string> rules;
  for (const ClaimSpec& spec : study.sub_claims) rules.push_back(claim_rule(spec, study.arms, variables));
  return fmt::format("{}.", fmt::join(rules, "; "));
}

namespace {

// A study stated as data: its sub-claims measured on the runs, and their rule before the judge's own notes.
void measure_sub_claims(const Study& study, const StudyOptions& options, const std::vector<RunOutcome>& outcomes,
                        Report& report) {
  const Json variables = study_variables(study, options);
  for (const ClaimSpec& spec : study.sub_claims) {
    report.claims.push_back(measure_claim(spec, study.arms, variables, outcomes, options.seeds));
    cannot_decide_unless(
        report.claims.back(), options.follows(spec.id),
        fmt::format("not followed here (--claims {}): its arms were not run", fmt::join(options.claims, ",")));
  }
  const std::string notes = report.verdict_rule;
  report.verdict_rule = sub_claims_rule(study, options) + (notes.empty() ? "" : " " + notes);
}

}  // namespace

Report judge_study(const Study& study, const StudyOptions& given, const std::vector<RunOutcome>& outcomes) {
  StudyOptions options = given;
  if (options.axes.empty()) resolve_axes(study, options);
  Report report = study.judge(options, outcomes);
  measure_sub_claims(study, options, outcomes, report);
  report.name = study.name, report.title = study.title, report.claim = study.claim, report.source = study.source;
  report.paper_setting = std::string(study.paper_setting);
  const std::string configs = config_summary(outcomes, options.overrides);
  report.setup = report.setup.empty() ? configs : configs + " " + report.setup;
  decide_family(report.claims, options.schedule);
  report.headline = report.claims.empty()    ? ""
                    : study.headline.empty() ? report.claims.front().id
                                             : std::string(study.headline);
  report.verdict = combine_verdicts(report.claims);
  report.verdict_rule += (report.verdict_rule.empty() ? "" : " ") + seed_rule_text(options.schedule);
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

std::string headline_text(const Report& report) {
  for (const SubClaim& c : report.claims)
    if (c.id == report.headline)
      return fmt::format("{}. {}: {} = {} ({}), interval {}: {}", c.id, c.statement, c.statistic, c.values.show(),
                         c.threshold(), c.interval(), c.outcome());
  return "";
}

namespace {

// Which seed set the report is on: "unseen" only when the pre-registration was frozen before every run behind it
// (preregistration.h), "not unseen: why" for seeds from 1001 that fail that check, "fresh" for seeds 101-1000 (kept
// from before freezing existed), "design" for the pilots' seeds below 101.
std::string seed_set(const Study& study, const StudyOptions& o, const std::string& hash,
                     const std::vector<RunOutcome>& runs) {
  const int lowest = *std::min_element(o.seeds.begin(), o.seeds.end());
  if (lowest < 101) return "design";
  if (lowest < kFirstUnseenSeed) return "fresh";
  const std::string problem = unseen_problem(o.dir, study.name, hash, runs);
  return problem.empty() ? "unseen" : "not unseen: " + problem;
}

// What report.json records beyond the verdict, for the findings index: sizes, steps, cost, machines, corpora.
Json study_record(const Study& study, const StudyOptions& o, const RunnerOptions& runner,
                  const std::vector<RunOutcome>& runs) {
  std::set<int> d_model, layers, steps;
  std::map<std::string, int> cpus;
  double core_seconds = 0;
  Json corpora = Json::object();
  for (const RunOutcome& r : runs) {
    d_model.insert(r.config["model"]["d_model"].get<int>());
    layers.insert(r.config["model"]["n_layers"].get<int>());
    if (r.request.kind == "train") steps.insert(r.config["train"]["steps"].get<int>());
    ++cpus[r.cpu.empty() ? "not recorded" : r.cpu];
    core_seconds += r.seconds * (r.threads > 0 ? r.threads : threads_per_process(runner));
    const std::string dir = r.config["data"]["dir"].get<std::string>();
    if (!corpora.contains(dir)) corpora[dir] = corpus_checksum(dir);
  }
  const std::string hash = preregistration_hash(preregistration(study, o));
  return {{"preset", o.quick   ? "quick"
                     : o.large ? "large"
                               : "default"},
          {"seeds", o.seeds},
          {"auto_seeds", o.auto_seeds},
          {"max_seeds", o.auto_seeds ? Json(o.max_seeds) : Json()},
          {"confidence", o.schedule.confidence()},
          {"planned_looks", o.schedule.looks},
          {"d_model", d_model},
          {"n_layers", layers},
          {"train_steps", steps},
          {"runs", runs.size()},
          {"core_hours", core_seconds / 3600},
          {"cpus", cpus},
          {"threads", runner.threads},
          {"jobs", runner.jobs},
          {"corpora", corpora},
          {"command", o.command_line},
          {"normlab", source_version()},
          {"runs_made_by", runs_made_by(runs)},
          {"preregistration", hash},
          {"seed_set", seed_set(study, o, hash, runs)}};
}

}  // namespace

namespace {

// The look a study stops at: its report written with the looks that led to it, the index refreshed.
StudyResult finish_study(const Study& study, const StudyOptions& options, const RunnerOptions& runner, Report report,
                         const std::vector<SeedLook>& looks, const std::vector<RunOutcome>& outcomes) {
  report.looks = looks;
  report.provenance = provenance(options, runner, outcomes);
  report.record = study_record(study, options, runner, outcomes);
  const fs::path html = write_report(options.dir, report);
  return {html, write_report_index(options.dir), report.verdict, report.failures, report.claims, headline_text(report)};
}

bool any_not_run(const std::vector<RunOutcome>& outcomes) {
  return std::any_of(outcomes.begin(), outcomes.end(), [](const RunOutcome& o) { return !fs::exists(o.dir); });
}

struct Judged {
  StudyOptions options;
  Report report;
  std::vector<RunOutcome> outcomes;
};

}  // namespace

StudyResult run_study(const Study& study, const StudyOptions& given, const RunnerOptions& runner) {
  StudyOptions options = given;
  if (options.seeds.empty()) choose_seeds(options, "", options.max_seeds);
  // A fixed seed list looks once; --seeds auto looks at 3, 5, 7 ... seeds and stops at the first look where no
  // sub-claim is unclear (its intervals account for every planned look: options.schedule).
  const std::vector<int> sizes = options.auto_seeds ? SeedSchedule::look_sizes(options.max_seeds)
                                                    : std::vector<int>{static_cast<int>(options.seeds.size())};
  std::vector<SeedLook> looks;
  std::optional<Judged> last;
  for (const int size : sizes) {
    if (options.auto_seeds) {
      options.seeds.clear();
      for (int k = 0; k < size; ++k) options.seeds.push_back(options.first_seed + k);
    }
    const std::vector<RunRequest> requests = plan_study(study, options);
    auto outcomes =
        options.judge_only ? stored_outcomes(options.dir, requests) : run_grid(options.dir, requests, runner);
    // --judge-only runs nothing: when the rule asks for seeds never run, the last look whose runs are all stored
    // stands, and its looks say that the rule wanted more.
    if (options.judge_only && last && any_not_run(outcomes)) {
      looks.back().unclear += fmt::format("; the rule would look again at {} seeds, never run", size);
      return finish_study(study, last->options, runner, last->report, looks, last->outcomes);
    }
    write_summary_csv(options.dir / "summary.csv", outcomes);
    Report report = judge_study(study, options, outcomes);
    looks.push_back({options.seeds, report.verdict, ids_where(report.claims, Truth::unclear)});
    // Only an unclear interval can change with more seeds; a sub-claim the runs cannot decide stays so.
    if (size != sizes.back() && report.verdict == "inconclusive" && !looks.back().unclear.empty()) {
      std::cerr << fmt::format("study: {} at {} seeds: sub-claim {} unclear; looking again at {} seeds (at most {})\n",
                               study.name, size, looks.back().unclear,
                               *std::upper_bound(sizes.begin(), sizes.end(), size), options.max_seeds);
      last = Judged{options, std::move(report), std::move(outcomes)};
      continue;
    }
    return finish_study(study, options, runner, std::move(report), looks, outcomes);
  }
  fail("internal: study {} looked at no seeds", study.name);
}

Json last_probe(const fs::path& run_dir, const std::string& family) {
  std::ifstream in(run_dir / "probes.jsonl");
  Json last;
  for (std::string line; std::getline(in, line);) {
    Json j = parse_json_or_discarded(line);
    if (!j.is_discarded() && j.value(probe::field::family, "") == family) last = j;
  }
  return last;
}

Json read_analysis(const fs::path& dir, const std::string& analysis) {
  std::ifstream in(dir / "analysis.jsonl");
  for (std::string line; std::getline(in, line);) {
    Json j = parse_json_or_discarded(line);
    if (!j.is_discarded() && j.value("analysis", "") == analysis) return j["result"];
  }
  return Json();
}

}  // namespace normlab::study
