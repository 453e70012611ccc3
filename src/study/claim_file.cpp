#include "study/claim_file.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "common/error.h"
#include "io/atomic_file.h"
#include "study/kit.h"

namespace normlab::study {

namespace fs = std::filesystem;

struct ArmFile {
  ArmSpec spec;
  Json set;                    // dotted config keys → values, on top of the file's `set`
  std::string kind = "train";  // train | probe (the analyses of a fresh init)
  std::string analyses;
};

struct ClaimFile {
  fs::path file;
  std::string name, title, claim, source, paper_setting, cost;
  Json set = Json::object(), quick = Json::object();
  std::vector<ArmFile> arms;
  std::vector<ArmSpec> arm_specs;
  std::vector<ClaimSpec> sub_claims;
  Study study;
};

namespace {

constexpr int kMaxArms = 64, kMaxSubClaims = 64;

// Where a field sits, for messages: "my-claim.json: arms[1].set".
struct Field {
  std::string file, path;
  Field operator/(std::string_view key) const {
    return {file, path.empty() ? std::string(key) : path + "." + std::string(key)};
  }
  Field operator[](size_t i) const { return {file, fmt::format("{}[{}]", path, i)}; }
  std::string text() const { return path.empty() ? file : file + ": " + path; }
};

void known_keys(const Json& object, std::initializer_list<std::string_view> keys, const Field& at) {
  if (!object.is_object()) fail("{}: expected an object {{...}}, not {}", at.text(), object.dump());
  for (const auto& [key, value] : object.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      fail("{}: unknown field (known here: {})", (at / key).text(), fmt::join(keys, ", "));
}

std::string text_field(const Json& object, const char* key, const Field& at, bool required = true) {
  if (!object.contains(key)) {
    if (required) fail("{}: missing (a text)", (at / key).text());
    return "";
  }
  const Json& v = object[key];
  if (!v.is_string() || (required && v.get<std::string>().empty()))
    fail("{}: expected a non-empty text, not {}", (at / key).text(), v.dump());
  return v.get<std::string>();
}

const Json& array_field(const Json& object, const char* key, const Field& at, int most) {
  if (!object.contains(key) || !object[key].is_array() || object[key].empty())
    fail("{}: expected a non-empty list [...]", (at / key).text());
  if (object[key].size() > static_cast<size_t>(most))
    fail("{}: {} entries; a claim file takes at most {}", (at / key).text(), object[key].size(), most);
  return object[key];
}

// A `set` object: dotted config keys with their values. A formula placement "@path" is read relative to the claim
// file's folder, so that a claim and its formulas move together.
Json read_set(const Json& object, const char* key, const Field& at, const fs::path& folder) {
  if (!object.contains(key)) return Json::object();
  const Json& set = object[key];
  if (!set.is_object())
    fail("{}: expected an object of dotted config keys, e.g. {{\"model.placement\": \"post\"}}", (at / key).text());
  Json out = set;
  for (auto& [k, v] : out.items())
    if (v.is_string() && v.get<std::string>().starts_with('@') &&
        fs::path(v.get<std::string>().substr(1)).is_relative())
      v = fmt::format("@{}", (folder / v.get<std::string>().substr(1)).lexically_normal().string());
  return out;
}

void apply_set(Json& config, const Json& set) {
  for (const auto& [key, value] : set.items()) apply_override(config, key + "=" + value.dump());
}

Json arm_config(const ClaimFile& c, const ArmFile& arm, int seed, bool quick) {
  Json config = small_lm("pre", 6, 300, static_cast<uint64_t>(seed));
  apply_set(config, c.set);
  if (quick) apply_set(config, c.quick.empty() ? Json{{"train.steps", 60}} : c.quick);
  apply_set(config, arm.set);
  config["train"]["seed"] = seed;
  const auto sets = [&](const char* key) { return c.set.contains(key) || arm.set.contains(key); };
  if (!sets("train.log_every")) config["train"]["log_every"] = log_interval(config["train"]["steps"].get<int>());
  return config;
}

ArmFile read_arm(const Json& j, const Field& at, const fs::path& folder) {
  known_keys(j, {"id", "label", "set", "kind", "analyses"}, at);
  ArmFile arm{{text_field(j, "id", at), text_field(j, "label", at, false)}, read_set(j, "set", at, folder)};
  const bool safe = std::all_of(arm.spec.id.begin(), arm.spec.id.end(), [](unsigned char ch) {
    return std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.';
  });
  if (!safe || arm.spec.id.front() == '.')
    fail("{}: \"{}\" names run folders: use letters, digits and . _ - (not starting with '.')", (at / "id").text(),
         arm.spec.id);
  if (j.contains("kind")) arm.kind = text_field(j, "kind", at);
  if (arm.kind != "train" && arm.kind != "probe")
    fail("{}: \"{}\" is not train or probe (a fresh init's analyses)", (at / "kind").text(), arm.kind);
  arm.analyses = text_field(j, "analyses", at, arm.kind == "probe");
  return arm;
}

Term read_term(const Json& j, const Field& at) {
  known_keys(j, {"arm", "statistic", "args"}, at);
  return {text_field(j, "arm", at), text_field(j, "statistic", at), j.value("args", Json::object())};
}

template <typename Enum>
Enum read_choice(const Json& j, const char* key, const Field& at,
                 std::initializer_list<std::pair<const char*, Enum>> choices, Enum fallback) {
  if (!j.contains(key)) return fallback;
  const std::string given = text_field(j, key, at);
  std::vector<std::string> names;
  for (const auto& [name, value] : choices) {
    if (given == name) return value;
    names.emplace_back(name);
  }
  fail("{}: \"{}\" is not one of {}", (at / key).text(), given, fmt::join(names, ", "));
}

ClaimSpec read_sub_claim(const Json& j, const Field& at) {
  known_keys(
      j, {"id", "statement", "quote", "where", "of", "against", "compare", "side", "threshold", "test", "at_init"}, at);
  ClaimSpec spec{.id = text_field(j, "id", at),
                 .statement = text_field(j, "statement", at),
                 .quote = text_field(j, "quote", at, false),
                 .where = text_field(j, "where", at, false)};
  if (!j.contains("of")) fail("{}: missing (the arm and statistic the sub-claim reads)", (at / "of").text());
  spec.of = read_term(j["of"], at / "of");
  if (j.contains("against")) spec.against = read_term(j["against"], at / "against");
  spec.compare =
      read_choice(j, "compare", at, {{"difference", Compare::difference}, {"ratio", Compare::ratio}}, Compare::none);
  spec.side = read_choice(
      j, "side", at,
      {{"above", SubClaim::Side::above}, {"below", SubClaim::Side::below}, {"within", SubClaim::Side::within}},
      SubClaim::Side::above);
  if (!j.contains("threshold")) fail("{}: missing (a number, or [lo, hi] with side within)", (at / "threshold").text());
  spec.threshold = j["threshold"];
  spec.test = read_choice(j, "test", at, {{"interval", SubClaim::Test::interval}, {"sign", SubClaim::Test::sign}},
                          SubClaim::Test::interval);
  if (j.contains("at_init")) {
    const Json& init = j["at_init"];
    if (!init.is_object()) fail("{}: expected an object with \"of\" (and \"against\")", (at / "at_init").text());
    known_keys(init, {"of", "against"}, at / "at_init");
    if (!init.contains("of")) fail("{}: missing", (at / "at_init" / "of").text());
    spec.at_init = InitControl{read_term(init["of"], at / "at_init" / "of")};
    if (init.contains("against")) spec.at_init->against = read_term(init["against"], at / "at_init" / "against");
  }
  return spec;
}

void read_header(ClaimFile& c, const Json& doc, const Field& at) {
  c.name = text_field(doc, "name", at);
  const bool plain = std::all_of(c.name.begin(), c.name.end(),
                                 [](unsigned char ch) { return std::islower(ch) || std::isdigit(ch) || ch == '-'; });
  if (!plain)
    fail("{}: \"{}\": use lower-case letters, digits and '-' (it names the study's folder)", (at / "name").text(),
         c.name);
  for (const Study* s : all_studies())
    if (s->name == c.name)
      fail("{}: \"{}\" is a built-in study; give your claim its own name", (at / "name").text(), c.name);
  c.title = text_field(doc, "title", at), c.claim = text_field(doc, "claim", at);
  c.source = text_field(doc, "source", at), c.paper_setting = text_field(doc, "paper_setting", at, false);
}

void read_arms(ClaimFile& c, const Json& doc, const Field& at) {
  const Json& arms = array_field(doc, "arms", at, kMaxArms);
  std::set<std::string> ids;
  for (size_t i = 0; i < arms.size(); ++i) {
    c.arms.push_back(read_arm(arms[i], (at / "arms")[i], c.file.parent_path()));
    if (!ids.insert(c.arms.back().spec.id).second)
      fail("{}: \"{}\" is the id of an earlier arm", ((at / "arms")[i] / "id").text(), c.arms.back().spec.id);
    for (const bool quick : {false, true})  // the run's config, as the runner will resolve it
      resolve_config(arm_config(c, c.arms.back(), 1, quick), ((at / "arms")[i] / "set").text());
    c.arm_specs.push_back(c.arms.back().spec);
  }
}

void read_sub_claims(ClaimFile& c, const Json& doc, const Field& at) {
  const Json& claims = array_field(doc, "sub_claims", at, kMaxSubClaims);
  std::set<std::string> ids;
  for (size_t i = 0; i < claims.size(); ++i) {
    const Field here = (at / "sub_claims")[i];
    c.sub_claims.push_back(check_claim(read_sub_claim(claims[i], here), c.arm_specs, Json::object(), here.text()));
    if (!ids.insert(c.sub_claims.back().id).second)
      fail("{}: \"{}\" is the id of an earlier sub-claim", (here / "id").text(), c.sub_claims.back().id);
  }
}

// The report of a claim file: its sub-claims (measured by judge_study), the first seed's loss curves and the runs.
Report judge_claim(const ClaimFile& c, const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  Report r;
  std::vector<std::string> arms;
  for (const ArmFile& a : c.arms)
    arms.push_back(fmt::format("{} ({}{})", a.spec.id, a.spec.label.empty() ? "" : a.spec.label + ": ", a.set.dump()));
  r.setup = fmt::format("A claim file ({}). Every run sets {}; arms: {}.", c.file.string(), c.set.dump(),
                        fmt::join(arms, "; "));
  Chart curves{fmt::format("training loss (seed {})", o.seeds.front()), "step", "loss"};
  for (const ArmFile& a : c.arms)
    if (a.kind == "train")
      curves.series.push_back(loss_series(a.spec.label.empty() ? a.spec.id : a.spec.label,
                                          find_run(runs, seed_id(a.spec.id, o.seeds.front()))));
  if (!curves.series.empty()) r.charts.push_back(curves);
  r.tables.push_back(outcome_table("Training runs", runs));
  return r;
}

std::vector<RunRequest> plan_claim(const ClaimFile& c, const StudyOptions& o) {
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (const ArmFile& a : c.arms)
      runs.push_back({seed_id(a.spec.id, seed), arm_config(c, a, seed, o.quick), a.kind, a.analyses});
  return runs;
}

}  // namespace

std::shared_ptr<const ClaimFile> read_claim_file(const fs::path& file) {
  auto c = std::make_shared<ClaimFile>();
  c->file = file;
  const Field at{file.string(), ""};
  const Json doc = parse_config_json(io::read_file(file, "claim file"), file.string());
  known_keys(doc, {"name", "title", "claim", "source", "paper_setting", "set", "quick", "arms", "sub_claims"}, at);
  read_header(*c, doc, at);
  c->set = read_set(doc, "set", at, file.parent_path()), c->quick = read_set(doc, "quick", at, file.parent_path());
  read_arms(*c, doc, at);
  read_sub_claims(*c, doc, at);
  c->cost = fmt::format("{} arms × the seeds, each a run of its `set` (see --help for the runs)", c->arms.size());
  const ClaimFile* self = c.get();
  c->study = Study{.name = c->name,
                   .title = c->title,
                   .claim = c->claim,
                   .source = c->source,
                   .paper_setting = c->paper_setting,
                   .cost = c->cost,
                   .plan = [self](const StudyOptions& o) { return plan_claim(*self, o); },
                   .arms = c->arm_specs,
                   .sub_claims = c->sub_claims,
                   .judge = [self](const StudyOptions& o,
                                   const std::vector<RunOutcome>& runs) { return judge_claim(*self, o, runs); }};
  return c;
}

const Study& study_of(const ClaimFile& claim) { return claim.study; }

}  // namespace normlab::study
