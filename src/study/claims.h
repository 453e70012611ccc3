#pragma once
// How a study decides its claim: each sub-claim is one number per seed, tested against a threshold with a
// Student-t interval over the seeds. The rule lives here and nowhere else; judges only state their
// sub-claims (statistic, claimed side, threshold) and judge_study decides them.
//
// The rule (docs/studies.md, "How a verdict is decided"):
//  * a sub-claim's statistic is measured per seed; a comparison of two arms is their difference (or ratio)
//    formed seed by seed, since the arms of one seed share its init and data order (a paired test);
//  * its interval is mean ± t(1 − α_i/2, n − 1) · sd / √n over the n seeds. The family's α is 0.05 / looks: a
//    study that may add seeds (`--seeds auto`: 3, then 2 at a time up to the cap) looks at its numbers up to
//    `looks` times, and Bonferroni over those planned looks keeps the chance of any false decision at any look at
//    or below 5%; a fixed seed list looks once (α = 0.05). Within one look, Holm's step-down spreads α over the
//    study's k sub-claims: ordered by p-value, the j-th (from 0) is tested at α_i = α / (k − j), until one is not
//    decided; it and the rest are tested at that level and stay unclear. So a false "holds" or "fails" anywhere in
//    the family has a chance of at most 5%;
//  * it holds when the interval lies wholly past the threshold on the claimed side, fails when it lies
//    wholly on the other side, and is unclear otherwise (one seed gives no interval: unclear);
//  * a sub-claim about train-or-stall outcomes (values in {−1, 0, 1} per seed: the claimed arm stalled and the
//    other trained, both alike, or the reverse) is a count, tested by the exact two-sided sign test on the seeds
//    that differ (exact McNemar): its p-value is 2 · P(Bin(m, ½) ≥ the larger count), m the seeds that differ;
//    decided when p < α_i, holding when the larger count is on the claimed side;
//  * a missing number on any seed (a run failed, a record is absent: NaN) leaves it undecided.
//  * verdict: reproduced (every sub-claim holds), partly reproduced (every one decided, some fail), not
//    reproduced (every one fails), inconclusive (some unclear, or one the runs cannot decide: a model that did
//    not train, a grid without the value it needs), incomplete (a number missing, or a run failed).
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

namespace normlab::study {

double mean(const std::vector<double>& v);  // NaN if empty
// The least-squares slope of y against x (the same length); NaN when a y is NaN or x does not vary.
double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y);
std::string num(double v);  // 3 decimals, or 3 significant digits when small; "n/a" for NaN

// A sub-claim's outcome. `undecided`: a number it needs is missing (evidence neither way); `unclear`:
// every number is there but the interval straddles the threshold.
enum class Truth { holds, fails, undecided, unclear };

// One quantity for each seed of a study, in the order of StudyOptions::seeds, so that two of them are
// paired by seed (the same seed's init, batches and data order on both sides).
struct SeedValues {
  std::vector<int> seeds;
  std::vector<double> values;  // values[i] belongs to seeds[i]; NaN where missing
  size_t n() const { return values.size(); }
  bool complete() const;  // at least one seed and no NaN
  double mean() const;    // NaN unless complete
  double sd() const;      // sample sd (n − 1); 0 for one seed; NaN unless complete and finite
  // "mean ± sd (n seeds)", "mean (1 seed)", or "n/a (seed 2 missing)".
  std::string show() const;
};

// The two-sided Student-t quantile t(p, dof): P(T ≤ t) = p for T with `dof` degrees of freedom.
double student_t_quantile(double p, int dof);

// The seeds a study's verdict may look at and the confidence of each look's interval.
struct SeedSchedule {
  static constexpr int kStart = 3, kStep = 2, kDefaultCap = 8;
  static constexpr double kFamilyAlpha = 0.05;
  int looks = 1;  // planned looks: 1 for a fixed seed list
  // `--seeds auto` with a cap: 3, 5, 7, ... seeds, the last look at the cap.
  static SeedSchedule automatic(int cap);
  // The seed counts at which an automatic study looks (3, 5, 7, 8 for the cap 8).
  static std::vector<int> look_sizes(int cap);
  double alpha() const { return kFamilyAlpha / looks; }
  double confidence() const { return 1 - alpha(); }
  // "95%" or "98.75% (Bonferroni over 4 planned looks: the family's 95%)".
  std::string describe() const;
};

struct SubClaim {
  enum class Side { above, below, within };
  // interval: the t interval over the seeds; sign: the exact sign test of the seeds' values against the threshold
  // (a count: how many seeds lie on each side of it).
  enum class Test { interval, sign };
  std::string id;         // "A", "B1"
  std::string statement;  // what the paper claims, as tested here
  std::string statistic;  // what each seed's number is
  SeedValues values;      // per seed
  Side side = Side::above;
  double lo = 0, hi = 0;      // above: > lo; below: < hi; within: lo < x < hi
  std::string cannot_decide;  // why the study's grid leaves it undecidable ("" if it does not)
  std::string quote, where;   // the paper's sentence and where it stands (a sub-claim stated as data: claim_spec.h)
  Test test = Test::interval;
  // The control at init: the same statistic before training (empty: the sub-claim is not about training). Shown
  // beside the value, with whether the rule would already hold there (set by decide()).
  SeedValues at_init = {};
  std::string init_statistic = "";
  Truth init_truth = Truth::undecided;
  // Set by decide():
  double confidence = 0.95;
  double interval_lo = 0, interval_hi = 0;  // NaN when there is no interval (fewer than 2 seeds, a NaN)
  Truth truth = Truth::undecided;
  double p_value = NAN;  // two-sided: the largest α at which it is still unclear (NaN: undecided)

  // A sign test's counts: seeds past the threshold on the claimed side, on the other side, and on it.
  struct Counts {
    int claimed = 0, reverse = 0, ties = 0;
  };
  Counts counts() const;
  // The test's one spelling in reports and pre-registrations: "t interval" or "exact sign test".
  const char* test_name() const { return test == Test::sign ? "exact sign test" : "t interval"; }

  // The threshold as text: "> 0.2", "< 0.85", "in (0.75, 1.33)".
  std::string threshold() const;
  // "[0.31, 1.02] (98.75%)", or why there is none.
  std::string interval() const;
  // "holds", "fails", "unclear: the interval straddles 0.2", "cannot decide: seed 2 missing".
  std::string outcome() const;
};

// The sub-claims a judge states: a statistic per seed against a threshold on its claimed side.
SubClaim claim_above(std::string id, std::string statement, std::string statistic, SeedValues values, double t);
SubClaim claim_below(std::string id, std::string statement, std::string statistic, SeedValues values, double t);
SubClaim claim_within(std::string id, std::string statement, std::string statistic, SeedValues values, double lo,
                      double hi);
// A sub-claim the study's grid cannot decide (an axis lacks what it needs): undecided, with the reason.
SubClaim& cannot_decide_unless(SubClaim& claim, bool decidable, std::string why);

// The two-sided p-value of a sub-claim's values against its threshold: for the t interval, the α at which the
// interval just touches the threshold; for the sign test, the exact binomial one. 1 when it cannot be decided.
double p_value(const SubClaim& claim);
// Decides a sub-claim at family level α (the interval at confidence 1 − α, or the sign test's p < α).
void decide(SubClaim& claim, double alpha);
// Decides a study's sub-claims together: Holm's step-down over them at the schedule's α (the rule above).
void decide_family(std::vector<SubClaim>& claims, const SeedSchedule& schedule);
// The exact two-sided sign test: 2 · P(Bin(claimed + reverse, ½) ≥ max(claimed, reverse)), at most 1.
double sign_test_p(int claimed, int reverse);
// The verdict from decided sub-claims (the rule above); a study with no sub-claims is incomplete.
std::string combine_verdicts(const std::vector<SubClaim>& claims);
// The ids of the sub-claims that fail / are unclear, "B, D" ("" if none).
std::string ids_where(const std::vector<SubClaim>& claims, Truth truth);

// The rule as a sentence, for reports.
std::string seed_rule_text(const SeedSchedule& schedule);

}  // namespace normlab::study
