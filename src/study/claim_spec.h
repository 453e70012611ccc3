#pragma once
// A sub-claim as data, the way a pre-registration states it: the paper's sentence and where it stands, the statistic
// (an entry of statistics.h with its arguments) read from one arm's runs, optionally compared seed by seed with the
// same or another statistic of another arm (a difference or a ratio), and the side of a threshold the paper's claim
// puts it on. A study lists its arms and sub-claims once; the judge, the report's rule and `--help` are all generated
// from that list, so a threshold is written in one place.
//
// Arm ids, statements and thresholds may name the study's variables in braces ("train-post-L{deep}-w0"): values
// a study derives from its preset and --grid (the deepest depth, the warm-up length), given by its `variables`.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/config_reader.h"
#include "study/claims.h"
#include "study/runner.h"

namespace normlab::study {

struct StudyOptions;

// One configuration of a study, run once per seed as "<id>-s<seed>"; the label names it in reports.
struct ArmSpec {
  std::string id, label;
};

// Over several arms, the number a seed contributes: the largest or the smallest of the arms' (the worst or the best
// cell of a grid), NaN when any arm's is; or the arm whose mean over the seeds is lowest or highest, read seed by seed
// (the best or worst setting of a sweep, chosen once for every seed), NaN on every seed when any arm's mean is NaN;
// or the least-squares slope of log(statistic) against log(x) over the arms, seed by seed, x the term's `x` list
// variable, one value per arm in the order they expand (growth with depth: 1 linear, near 0 logarithmic).
enum class Extreme { none, largest, smallest, lowest_mean, highest_mean, log_log_slope };

// One side of a sub-claim: a statistic of one arm's runs, or its extreme over several arms.
struct Term {
  std::string arm;        // an ArmSpec's id (a template over the variables)
  std::string statistic;  // an entry of statistics.h
  Json args = Json::object();
  // With an extreme, the arm template may name list variables ("pre-lr{lr}-w0" with lr = [0.001, 0.003]): the term
  // ranges over the arm for each combination of their values. Without one, it must name one arm.
  Extreme extreme = Extreme::none;
  std::string x = "";  // log_log_slope: the list variable giving each arm's x
};

enum class Compare { none, difference, ratio };

// A condition a sub-claim needs from the study's grid: the variable must be true, or the sub-claim is undecided with
// `why` as the reason.
struct Need {
  std::string variable, why;
};

// The same comparison before training: a sub-claim about what training does is also measured at init, and the report
// shows whether its rule would already hold there.
struct InitControl {
  Term of;
  std::optional<Term> against = std::nullopt;
};

// What an arm's runs must do for a sub-claim to be decided: not diverge (a reference counted at the unigram entropy is
// nothing to match or beat), or train (a model that did not learn says nothing about a trained one's layers).
enum class RunMust { not_diverge, train };
struct RunsMust {
  std::string arm;  // an ArmSpec's id (a template over the variables)
  RunMust must;
};

// The threshold of a count read from a 1-or-0 statistic (`not_trained`) by the sign test: seeds above it against
// seeds below, i.e. more seeds did (or did not) than not.
inline constexpr double kHalfASeed = 0.5;

struct ClaimSpec {
  std::string id;         // "A", "B1"
  std::string statement;  // what the paper claims, as tested here (a template)
  std::string quote;      // the paper's own sentence
  std::string where;      // where it stands: section, figure or table
  Term of;
  std::optional<Term> against = std::nullopt;  // with compare: of − against, or of ÷ against, seed by seed
  Compare compare = Compare::none;
  SubClaim::Side side = SubClaim::Side::above;
  // above / below: a number or a variable's name; within: [lo, hi], each a number or a variable's name.
  Json threshold = 0;
  std::vector<Need> needs = {};
  // interval: the t interval over the seeds; sign: a count of the seeds on each side of the threshold, by the exact
  // sign test (the test for train-or-stall outcomes: `stalled_or_diverged` of one arm − of another).
  SubClaim::Test test = SubClaim::Test::interval;
  std::optional<InitControl> at_init = std::nullopt;
  // Conditions on arms' runs without which the sub-claim says nothing: a seed on which one fails leaves it undecided.
  std::vector<RunsMust> runs_must = {};
};

// The values the templates of a study's data may name, from its options (preset, --grid, --set).
using Variables = std::function<Json(const StudyOptions&)>;

// `text` with each {name} replaced by the variable's value (a whole number as such, others as {:g}, a list as its
// values joined by ", "); fails naming `where` on a name no variable has.
std::string fill(const std::string& text, const Json& variables, std::string_view where);
// `text` once for each combination of the values of the list variables it names, filled (`fill`) otherwise; at most
// kMaxExpansion texts, failing naming `where` beyond.
std::vector<std::string> expand(const std::string& text, const Json& variables, std::string_view where);
inline constexpr size_t kMaxExpansion = 4096;

// Checks a sub-claim's data against the statistics table (names and arguments), its arms against the study's, and its
// threshold's shape (a name in it must be a number among `variables`); fails with one sentence naming `where` and the
// field. Returns the spec with every statistic's default arguments filled in.
ClaimSpec check_claim(ClaimSpec spec, const std::vector<ArmSpec>& arms, const Json& variables, std::string_view where);

// The sub-claim measured on every seed and ready to decide (claims.h decide()): its per-seed values, statistic text
// and threshold; undecided with a reason when a need is not met.
SubClaim measure_claim(const ClaimSpec& spec, const std::vector<ArmSpec>& arms, const Json& variables,
                       const std::vector<RunOutcome>& runs, const std::vector<int>& seeds);

// For a term chosen by mean (lowest_mean, highest_mean): the arm it reads, the first in the template's order on a tie;
// empty when any arm's mean is NaN.
std::string chosen_arm(const Term& term, const Json& variables, const std::vector<RunOutcome>& runs,
                       const std::vector<int>& seeds);

// One side's statistic on every seed (a study's charts and evidence read the numbers its sub-claims read).
SeedValues measure_term(const Term& term, const Json& variables, const std::vector<RunOutcome>& runs,
                        const std::vector<int>& seeds);

// The arms a sub-claim reads (its terms', its control's and its conditions'), each template expanded over the
// variables, in order and each once: the runs it cannot be measured without.
std::vector<std::string> arms_read(const ClaimSpec& spec, const Json& variables);

// The rule of one sub-claim in words: "B1: final training loss of Post-LN, 12 layers, no warm-up − of Pre-LN ...
// > 0.2".
std::string claim_rule(const ClaimSpec& spec, const std::vector<ArmSpec>& arms, const Json& variables);

}  // namespace normlab::study
