#include "study/claim_spec.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "study/kit.h"
#include "study/statistics.h"

namespace normlab::study {

namespace {

std::string value_text(const Json& v) {
  if (v.is_array()) {
    std::vector<std::string> each;
    for (const Json& x : v) each.push_back(value_text(x));
    return fmt::format("{}", fmt::join(each, ", "));
  }
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return fmt::format("{:g}", v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

bool is_name(std::string_view text) {
  return !text.empty() && !std::isdigit(static_cast<unsigned char>(text.front())) &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// A threshold bound: a number, or a variable holding one.
double bound(const Json& value, const Json& variables) {
  if (value.is_number()) return value.get<double>();
  return variables[value.get<std::string>()].get<double>();  // check_bound made sure it is a number
}

void check_bound(const Json& value, const Json& variables, std::string_view where) {
  const bool named = value.is_string() && variables.contains(value.get<std::string>()) &&
                     variables[value.get<std::string>()].is_number();
  if (!value.is_number() && !named)
    fail("{}: expected a number (or the name of a number among the study's variables), not {}", where, value.dump());
}

void check_threshold(const ClaimSpec& spec, const Json& variables, std::string_view where) {
  const std::string field = fmt::format("{}.threshold", where);
  if (spec.side != SubClaim::Side::within) return check_bound(spec.threshold, variables, field);
  if (!spec.threshold.is_array() || spec.threshold.size() != 2)
    fail("{}: a claim that the statistic lies within two bounds takes [lo, hi], not {}", field, spec.threshold.dump());
  check_bound(spec.threshold[0], variables, field + "[0]"), check_bound(spec.threshold[1], variables, field + "[1]");
}

void check_arm(const std::string& arm, const std::vector<ArmSpec>& arms, const std::string& where) {
  if (std::none_of(arms.begin(), arms.end(), [&](const ArmSpec& a) { return a.id == arm; })) {
    std::vector<std::string> ids;
    for (const ArmSpec& a : arms) ids.push_back(a.id);
    fail("{}: \"{}\" is not one of the study's arms ({})", where, arm, fmt::join(ids, ", "));
  }
}

Term check_term(Term term, const std::vector<ArmSpec>& arms, const Json& variables, const std::string& where) {
  check_arm(term.arm, arms, where + ".arm");
  if (term.extreme == Extreme::none && expand(term.arm, variables, where + ".arm").size() != 1)
    fail(
        "{}.arm: \"{}\" names several arms (a list variable); say which of them counts: extreme largest or smallest "
        "(seed by seed), lowest_mean or highest_mean (one arm, by its mean over the seeds), or log_log_slope (a fit "
        "over them)",
        where, term.arm);
  if (term.extreme == Extreme::log_log_slope &&
      (!variables.contains(term.x) || !variables[term.x].is_array() ||
       variables[term.x].size() != expand(term.arm, variables, where + ".arm").size() ||
       !std::all_of(variables[term.x].begin(), variables[term.x].end(), [](const Json& v) { return v.is_number(); })))
    fail("{}.x: a slope over the arms needs a list variable with one number per arm, not \"{}\"", where, term.x);
  term.args = check_arguments(find_statistic(term.statistic, where + ".statistic"), term.args, where + ".args");
  return term;
}

std::string label_of(const std::string& arm, const std::vector<ArmSpec>& arms, const Json& variables) {
  for (const ArmSpec& a : arms)
    if (a.id == arm) return fill(a.label.empty() ? a.id : a.label, variables, "arm " + a.id);
  return fill(arm, variables, "arm");
}

std::string describe(const Term& t) { return find_statistic(t.statistic, "statistic").describe(t.args); }

// A term's arm in words: its label, or over several arms "the largest over <label>".
std::string arm_text(const Term& t, const std::vector<ArmSpec>& arms, const Json& variables) {
  const std::string label = label_of(t.arm, arms, variables);
  switch (t.extreme) {
    case Extreme::none:
      return label;
    case Extreme::largest:
      return "the largest over " + label;
    case Extreme::smallest:
      return "the smallest over " + label;
    case Extreme::lowest_mean:
      return "the one with the lowest mean over the seeds among " + label;
    case Extreme::highest_mean:
      return "the one with the highest mean over the seeds among " + label;
    case Extreme::log_log_slope:
      return fmt::format("the least-squares slope of its log against log {} ({}) over {}", t.x,
                         value_text(variables[t.x]), label);
  }
  return label;
}

std::string statistic_text(const ClaimSpec& spec, const std::vector<ArmSpec>& arms, const Json& variables) {
  const std::string of = arm_text(spec.of, arms, variables);
  if (!spec.against) return fmt::format("{}, {}", describe(spec.of), of);
  const char* op = spec.compare == Compare::ratio ? "÷" : "−";
  const std::string against = arm_text(*spec.against, arms, variables);
  if (spec.against->statistic == spec.of.statistic && spec.against->args == spec.of.args)
    return fmt::format("{}, {} {} {}", describe(spec.of), of, op, against);
  if (spec.against->arm == spec.of.arm && spec.against->extreme == spec.of.extreme)
    return fmt::format("{}: {} {} {}", of, describe(spec.of), op, describe(*spec.against));
  return fmt::format("{} of {} {} {} of {}", describe(spec.of), of, op, describe(*spec.against), against);
}

// The control's statistic in words: the sub-claim's, read at init.
std::string init_text(const ClaimSpec& spec, const std::vector<ArmSpec>& arms, const Json& variables) {
  ClaimSpec control = spec;
  control.of = spec.at_init->of, control.against = spec.at_init->against;
  return statistic_text(control, arms, variables);
}

// An empty claim on the spec's side of its threshold (values are set by the caller).
SubClaim sided(const ClaimSpec& spec, std::string statement, std::string statistic, SeedValues values,
               const Json& variables) {
  switch (spec.side) {
    case SubClaim::Side::above:
      return claim_above(spec.id, statement, statistic, values, bound(spec.threshold, variables));
    case SubClaim::Side::below:
      return claim_below(spec.id, statement, statistic, values, bound(spec.threshold, variables));
    case SubClaim::Side::within:
      break;
  }
  return claim_within(spec.id, statement, statistic, values, bound(spec.threshold[0], variables),
                      bound(spec.threshold[1], variables));
}

// The least-squares slope of log y against log x (NaN when any y is NaN or not positive, or x does not vary).
double log_log_slope(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> lx, ly;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) lx.push_back(std::log(x[i])), ly.push_back(std::log(y[i]));
  return lx.size() == x.size() ? least_squares_slope(lx, ly) : NAN;
}

// The number a seed contributes over several arms' values: their largest or smallest, NaN when any is NaN or none.
double extreme_of(const std::vector<double>& values, Extreme extreme) {
  if (values.empty() || std::any_of(values.begin(), values.end(), [](double v) { return std::isnan(v); })) return NAN;
  return extreme == Extreme::smallest ? *std::min_element(values.begin(), values.end())
                                      : *std::max_element(values.begin(), values.end());
}

// One arm's statistic on every seed.
SeedValues arm_values(const Statistic& statistic, const Json& args, const std::string& arm,
                      const std::vector<RunOutcome>& runs, const std::vector<int>& seeds) {
  return over_seeds(seeds, [&](int seed) { return statistic.of_run(find_run(runs, seed_id(arm, seed)), args); });
}

bool by_mean(Extreme extreme) { return extreme == Extreme::lowest_mean || extreme == Extreme::highest_mean; }

}  // namespace

std::string chosen_arm(const Term& t, const Json& variables, const std::vector<RunOutcome>& runs,
                       const std::vector<int>& seeds) {
  const Statistic& statistic = find_statistic(t.statistic, "statistic");
  const Json args = check_arguments(statistic, t.args, t.arm);
  std::string chosen;
  double chosen_mean = NAN;
  for (const std::string& arm : expand(t.arm, variables, "arm")) {
    const double m = arm_values(statistic, args, arm, runs, seeds).mean();
    if (std::isnan(m)) return "";
    if (chosen.empty() || (t.extreme == Extreme::highest_mean ? m > chosen_mean : m < chosen_mean))
      chosen = arm, chosen_mean = m;
  }
  return chosen;
}

SeedValues measure_term(const Term& t, const Json& variables, const std::vector<RunOutcome>& runs,
                        const std::vector<int>& seeds) {
  const Statistic& statistic = find_statistic(t.statistic, "statistic");
  const Json args = check_arguments(statistic, t.args, t.arm);
  if (by_mean(t.extreme)) {
    const std::string arm = chosen_arm(t, variables, runs, seeds);
    return arm.empty() ? over_seeds(seeds, [](int) { return NAN; }) : arm_values(statistic, args, arm, runs, seeds);
  }
  const std::vector<std::string> arms = expand(t.arm, variables, "arm");
  std::vector<double> x;
  if (t.extreme == Extreme::log_log_slope)
    for (const Json& v : variables[t.x]) x.push_back(v.get<double>());
  return over_seeds(seeds, [&](int seed) {
    std::vector<double> values;
    for (const std::string& arm : arms) values.push_back(statistic.of_run(find_run(runs, seed_id(arm, seed)), args));
    if (t.extreme == Extreme::log_log_slope) return log_log_slope(x, values);
    return t.extreme == Extreme::none ? (values.size() == 1 ? values.front() : NAN) : extreme_of(values, t.extreme);
  });
}

std::vector<std::string> expand(const std::string& text, const Json& variables, std::string_view where) {
  for (size_t open = text.find('{'); open != std::string::npos; open = text.find('{', open + 1)) {
    const size_t close = text.find('}', open);
    if (close == std::string::npos) break;
    const std::string name = text.substr(open + 1, close - open - 1);
    if (!is_name(name) || !variables.is_object() || !variables.contains(name) || !variables[name].is_array()) continue;
    std::vector<std::string> out;
    for (const Json& value : variables[name]) {
      std::string one = text;
      for (size_t at = one.find("{" + name + "}"); at != std::string::npos; at = one.find("{" + name + "}", at))
        one.replace(at, name.size() + 2, value_text(value));
      for (std::string& filled : expand(one, variables, where)) {
        if (out.size() == kMaxExpansion) fail("{}: \"{}\" names more than {} arms", where, text, kMaxExpansion);
        out.push_back(std::move(filled));
      }
    }
    return out;
  }
  return {fill(text, variables, where)};
}

std::string fill(const std::string& text, const Json& variables, std::string_view where) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    const size_t open = text.find('{', at), close = open == std::string::npos ? open : text.find('}', open);
    if (close == std::string::npos) return out + text.substr(at);
    const std::string name = text.substr(open + 1, close - open - 1);
    out += text.substr(at, open - at);
    if (!is_name(name)) {
      out += text.substr(open, close - open + 1);
    } else if (variables.is_object() && variables.contains(name)) {
      out += value_text(variables[name]);
    } else {
      fail("{}: \"{}\" names {{{}}}, which is not one of the study's variables", where, text, name);
    }
    at = close + 1;
  }
  return out;
}

ClaimSpec check_claim(ClaimSpec spec, const std::vector<ArmSpec>& arms, const Json& variables, std::string_view where) {
  const std::string at(where);
  if (spec.id.empty()) fail("{}.id: every sub-claim needs an id (A, B1, ...)", at);
  if (spec.statement.empty()) fail("{}.statement: say what the paper claims, as tested here", at);
  spec.of = check_term(spec.of, arms, variables, at + ".of");
  if (spec.against.has_value() != (spec.compare != Compare::none))
    fail("{}: {}", at,
         spec.against ? "\"against\" needs \"compare\": difference or ratio"
                      : "\"compare\" needs \"against\": the arm and statistic it is compared with");
  if (spec.against) spec.against = check_term(*spec.against, arms, variables, at + ".against");
  check_threshold(spec, variables, at);
  for (const RunsMust& condition : spec.runs_must) check_arm(condition.arm, arms, at + ".runs_must");
  if (spec.test == SubClaim::Test::sign && spec.side == SubClaim::Side::within)
    fail("{}.test: the sign test counts seeds on each side of one threshold; use side above or below", at);
  if (spec.at_init) {
    if (spec.at_init->against.has_value() != spec.against.has_value())
      fail("{}.at_init: the control compares as the sub-claim does ({})", at,
           spec.against ? "give \"against\" too" : "drop \"against\"");
    spec.at_init->of = check_term(spec.at_init->of, arms, variables, at + ".at_init.of");
    if (spec.at_init->against)
      spec.at_init->against = check_term(*spec.at_init->against, arms, variables, at + ".at_init.against");
  }
  return spec;
}

namespace {

// Undecided, naming the seeds, where a run of the arm fails the condition (a missing or failed run is left to the
// statistics, which give it no number).
void refuse_unless(SubClaim& claim, const RunsMust& condition, const std::vector<ArmSpec>& arms, const Json& variables,
                   const std::vector<RunOutcome>& runs, const std::vector<int>& seeds) {
  std::vector<int> failing;
  for (const std::string& arm : expand(condition.arm, variables, "runs_must"))
    for (int seed : seeds) {
      const Outcome outcome = train_result(find_run(runs, seed_id(arm, seed))).outcome;
      const bool fails = condition.must == RunMust::not_diverge
                             ? outcome == Outcome::diverged
                             : outcome != Outcome::trained && outcome != Outcome::failed && outcome != Outcome::missing;
      if (fails) failing.push_back(seed);
    }
  const std::string label = label_of(condition.arm, arms, variables),
                    which = fmt::format("{}", fmt::join(failing, ", "));
  cannot_decide_unless(
      claim, failing.empty(),
      condition.must == RunMust::not_diverge
          ? fmt::format("{} diverged on seed {}: no reference to match", label, which)
          : fmt::format("{} did not train on seed {}: its layers are not a trained model's", label, which));
}

// `of`, or `of` compared with `against` seed by seed.
SeedValues compared(const Term& of, const std::optional<Term>& against, Compare compare, const Json& variables,
                    const std::vector<RunOutcome>& runs, const std::vector<int>& seeds) {
  const SeedValues values = measure_term(of, variables, runs, seeds);
  if (!against) return values;
  const SeedValues other = measure_term(*against, variables, runs, seeds);
  return compare == Compare::ratio ? ratio(values, other) : difference(values, other);
}

}  // namespace

SubClaim measure_claim(const ClaimSpec& given, const std::vector<ArmSpec>& arms, const Json& variables,
                       const std::vector<RunOutcome>& runs, const std::vector<int>& seeds) {
  const ClaimSpec spec = check_claim(given, arms, variables, "sub-claim " + given.id);
  SubClaim claim = sided(spec, fill(spec.statement, variables, "sub-claim " + spec.id + " statement"),
                         statistic_text(spec, arms, variables),
                         compared(spec.of, spec.against, spec.compare, variables, runs, seeds), variables);
  claim.quote = spec.quote, claim.where = spec.where, claim.test = spec.test;
  if (spec.at_init) {
    claim.at_init = compared(spec.at_init->of, spec.at_init->against, spec.compare, variables, runs, seeds);
    claim.init_statistic = init_text(spec, arms, variables);
  }
  for (const Need& need : spec.needs)
    cannot_decide_unless(claim, variables.contains(need.variable) && variables[need.variable] == true, need.why);
  for (const RunsMust& condition : spec.runs_must) refuse_unless(claim, condition, arms, variables, runs, seeds);
  return claim;
}

std::vector<std::string> arms_read(const ClaimSpec& spec, const Json& variables) {
  std::vector<std::string> templates = {spec.of.arm};
  if (spec.against) templates.push_back(spec.against->arm);
  if (spec.at_init) {
    templates.push_back(spec.at_init->of.arm);
    if (spec.at_init->against) templates.push_back(spec.at_init->against->arm);
  }
  for (const RunsMust& condition : spec.runs_must) templates.push_back(condition.arm);
  std::vector<std::string> arms;
  for (const std::string& arm_template : templates)
    for (std::string& arm : expand(arm_template, variables, "sub-claim " + spec.id))
      if (std::find(arms.begin(), arms.end(), arm) == arms.end()) arms.push_back(std::move(arm));
  return arms;
}

std::string claim_rule(const ClaimSpec& given, const std::vector<ArmSpec>& arms, const Json& variables) {
  const ClaimSpec spec = check_claim(given, arms, variables, "sub-claim " + given.id);
  SubClaim shape = sided(spec, "", "", {}, variables);
  shape.test = spec.test;
  return fmt::format("{}: {} {}{}", spec.id, statistic_text(spec, arms, variables), shape.threshold(),
                     spec.at_init ? " (control at init: " + init_text(spec, arms, variables) + ")" : "");
}

}  // namespace normlab::study
