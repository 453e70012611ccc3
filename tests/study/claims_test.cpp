// The decision rule of claims.h: a sub-claim's t-interval over the seeds against its threshold, Bonferroni
// over the planned looks of --seeds auto, and the five verdicts.
#include <gtest/gtest.h>

#include <cmath>

#include "study/claims.h"

namespace normlab::study {
namespace {

SeedValues values(std::vector<double> v) {
  SeedValues out;
  for (size_t i = 0; i < v.size(); ++i) out.seeds.push_back(static_cast<int>(i + 1));
  out.values = std::move(v);
  return out;
}

SubClaim decided(SubClaim c, int looks = 1) {
  decide(c, SeedSchedule{looks}.alpha());
  return c;
}

// Reference values computed independently (Simpson's rule on the t density, bisection).
TEST(SeedRule, StudentTQuantilesMatchTheTables) {
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.706205, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.302653, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 7), 2.364624, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.99375, 2), 8.860200, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.99375, 4), 4.314656, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.99375, 7), 3.335295, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.025, 2), -4.302653, 1e-6);
  EXPECT_THROW(student_t_quantile(1.0, 3), std::invalid_argument);
}

// --seeds auto looks at 3, 5, 7 ... seeds, the last look at the cap; each look's interval is at 1 − 0.05/looks.
TEST(SeedRule, TheAutomaticScheduleLooksAtThreeFiveSevenAndTheCap) {
  EXPECT_EQ(SeedSchedule::look_sizes(8), (std::vector<int>{3, 5, 7, 8}));
  EXPECT_EQ(SeedSchedule::look_sizes(7), (std::vector<int>{3, 5, 7}));
  EXPECT_EQ(SeedSchedule::look_sizes(3), (std::vector<int>{3}));
  EXPECT_EQ(SeedSchedule::automatic(8).looks, 4);
  EXPECT_DOUBLE_EQ(SeedSchedule::automatic(8).confidence(), 0.9875);
  EXPECT_DOUBLE_EQ(SeedSchedule{}.confidence(), 0.95);
  EXPECT_EQ(SeedSchedule{}.describe(), "95%");
  EXPECT_NE(SeedSchedule::automatic(8).describe().find("Bonferroni over 4 planned looks"), std::string::npos);
}

TEST(SeedRule, HoldsWhenTheIntervalLiesWhollyPastTheThreshold) {
  const SubClaim c = decided(claim_above("A", "x", "x", values({2.0, 2.2, 2.1}), 1.5));
  EXPECT_EQ(c.truth, Truth::holds);
  // mean 2.1, sd 0.1, t(0.975, 2) = 4.3027: 2.1 ± 0.2484
  EXPECT_NEAR(c.interval_lo, 2.1 - 4.302653 * 0.1 / std::sqrt(3.0), 1e-6);
  EXPECT_NEAR(c.interval_hi, 2.1 + 4.302653 * 0.1 / std::sqrt(3.0), 1e-6);
  EXPECT_EQ(decided(claim_below("B", "x", "x", values({1.0, 1.2, 1.1}), 1.5)).truth, Truth::holds);
  EXPECT_EQ(decided(claim_within("C", "x", "x", values({0.9, 1.1, 1.0}), 0.5, 1.5)).truth, Truth::holds);
}

TEST(SeedRule, FailsWhenTheIntervalLiesWhollyOnTheOtherSide) {
  EXPECT_EQ(decided(claim_above("A", "x", "x", values({1.0, 1.2, 1.1}), 1.5)).truth, Truth::fails);
  EXPECT_EQ(decided(claim_below("B", "x", "x", values({2.0, 2.2, 2.1}), 1.5)).truth, Truth::fails);
  EXPECT_EQ(decided(claim_within("C", "x", "x", values({2.0, 2.2, 2.1}), 0.5, 1.5)).truth, Truth::fails);
  EXPECT_EQ(decided(claim_within("C", "x", "x", values({0.1, 0.2, 0.15}), 0.5, 1.5)).truth, Truth::fails);
}

TEST(SeedRule, IsUnclearWhenTheIntervalReachesAcrossTheThreshold) {
  // Every seed above 1.5, but the spread is too wide for 3 seeds to place the mean above it.
  const SubClaim wide = decided(claim_above("A", "x", "x", values({1.6, 2.6, 1.7}), 1.5));
  EXPECT_EQ(wide.truth, Truth::unclear);
  EXPECT_LT(wide.interval_lo, 1.5);
  EXPECT_EQ(decided(claim_above("A", "x", "x", values({2.0, 2.0, 0.5}), 1.0)).truth, Truth::unclear);
  // A band the interval covers wholly is neither inside nor outside.
  EXPECT_EQ(decided(claim_within("C", "x", "x", values({0.0, 2.0, 1.0}), 0.9, 1.1)).truth, Truth::unclear);
  // One seed gives no interval.
  const SubClaim one = decided(claim_above("A", "x", "x", values({9.0}), 1.0));
  EXPECT_EQ(one.truth, Truth::unclear);
  EXPECT_EQ(one.interval(), "n/a (1 seed: no interval)");
}

// The same numbers decide at one look (95%) and not at four planned looks (98.75% each).
TEST(SeedRule, BonferroniOverThePlannedLooksWidensEachInterval) {
  const SubClaim c = claim_above("A", "x", "x", values({1.0, 1.3, 1.6}), 0.3);
  EXPECT_EQ(decided(c, 1).truth, Truth::holds);    // 1.3 ± 4.303 · 0.3/√3 = [0.555, 2.045]
  EXPECT_EQ(decided(c, 4).truth, Truth::unclear);  // 1.3 ± 8.860 · 0.3/√3 = [−0.235, 2.835]
  EXPECT_NEAR(decided(c, 4).confidence, 0.9875, 1e-12);
}

// The p-value is the α at which the interval just touches the threshold: decided below it, unclear above.
TEST(SeedRule, ThePValueIsWhereTheIntervalTouchesTheThreshold) {
  const SubClaim c = claim_above("A", "x", "x", values({1.0, 1.3, 1.6}), 0.3);
  const double p = p_value(c);  // t = 1.0 / (0.3/√3) = 5.774 on 2 dof: two-sided 0.0287
  EXPECT_NEAR(p, 0.028714, 1e-5);
  SubClaim at = c;
  decide(at, p * 1.001);
  EXPECT_EQ(at.truth, Truth::holds);
  decide(at, p * 0.999);
  EXPECT_EQ(at.truth, Truth::unclear);
  EXPECT_NEAR(p_value(claim_within("A", "x", "x", values({1.0, 1.3, 1.6}), 0.3, 2.3)), p, 1e-12);
}

// Holm: the smallest p-value is tested at α/k, the next at α/(k − 1) ..., and the first one not decided stops the
// rest. Three sub-claims at α 0.05: p ≈ 0.0001 (at 0.0167: holds), p ≈ 0.0287 (at 0.025: unclear, stops), and a
// third with p ≈ 0.0287 too, which alone at 0.05 would hold but stays unclear.
TEST(SeedRule, HolmStepsDownOverTheSubClaims) {
  std::vector<SubClaim> family = {claim_above("A", "x", "x", values({10.0, 10.1, 10.2}), 0.3),
                                  claim_above("B", "x", "x", values({1.0, 1.3, 1.6}), 0.3),
                                  claim_below("C", "x", "x", values({-1.0, -1.3, -1.6}), -0.3)};
  decide_family(family, SeedSchedule{1});
  EXPECT_EQ(family[0].truth, Truth::holds);
  EXPECT_NEAR(family[0].confidence, 1 - 0.05 / 3, 1e-12);
  EXPECT_EQ(family[1].truth, Truth::unclear);
  EXPECT_NEAR(family[1].confidence, 1 - 0.05 / 2, 1e-12);
  EXPECT_EQ(family[2].truth, Truth::unclear);
  EXPECT_EQ(decided(family[2]).truth, Truth::holds);  // alone, at 0.05
  // Looks and sub-claims together: one sub-claim at 4 looks is tested at 0.0125.
  std::vector<SubClaim> alone = {family[0]};
  decide_family(alone, SeedSchedule{4});
  EXPECT_NEAR(alone[0].confidence, 0.9875, 1e-12);
}

// A train-or-stall sub-claim counts seeds: 2 · P(Bin(m, ½) ≥ the larger count) over the m seeds that differ.
TEST(SeedRule, CountsAreDecidedByTheExactSignTest) {
  EXPECT_NEAR(sign_test_p(5, 0), 2.0 / 32, 1e-15);
  EXPECT_NEAR(sign_test_p(6, 1), 2.0 * 8 / 128, 1e-15);
  EXPECT_EQ(sign_test_p(0, 0), 1.0);
  EXPECT_EQ(sign_test_p(2, 2), 1.0);
  SubClaim stalls = claim_above("B1", "x", "x", values({1, 1, 1, 1, 1, 1, 0}), 0);
  stalls.test = SubClaim::Test::sign;
  EXPECT_EQ(stalls.counts().claimed, 6);
  EXPECT_EQ(stalls.counts().ties, 1);
  EXPECT_EQ(decided(stalls).truth, Truth::holds);       // p = 2/64 = 0.031 < 0.05
  EXPECT_EQ(decided(stalls, 4).truth, Truth::unclear);  // not below 0.0125
  EXPECT_EQ(decided(stalls, 4).outcome(), "unclear: p = 0.031 is not below α 0.0125");
  SubClaim reverse = stalls;
  reverse.values = values({-1, -1, -1, -1, -1, -1, 0});
  EXPECT_EQ(decided(reverse).truth, Truth::fails);
  // A t interval over the same 0/1 values would call it decided at 4 looks: the count is the honest test.
  SubClaim as_interval = stalls;
  as_interval.test = SubClaim::Test::interval;
  EXPECT_EQ(decided(as_interval, 4).truth, Truth::holds);
}

// The control at init: the same rule applied to the statistic before training.
TEST(SeedRule, TheInitControlSaysWhetherTheClaimHeldBeforeTraining) {
  SubClaim c = claim_above("A", "x", "x", values({10.0, 10.5, 11.0}), 2.0);
  c.at_init = values({8.0, 8.6, 7.9});
  EXPECT_EQ(decided(c).init_truth, Truth::holds);
  c.at_init = values({1.0, 1.1, 0.9});
  EXPECT_EQ(decided(c).init_truth, Truth::fails);
  c.at_init = {};
  EXPECT_EQ(decided(c).init_truth, Truth::undecided);
}

TEST(SeedRule, AMissingNumberOrAnUndecidableGridDecidesNothing) {
  const SubClaim missing = decided(claim_above("A", "x", "x", values({2.0, NAN, 2.1}), 1.5));
  EXPECT_EQ(missing.truth, Truth::undecided);
  EXPECT_EQ(missing.outcome(), "cannot decide: n/a (seed 2 missing)");
  SubClaim grid = claim_above("A", "x", "x", values({2.0, 2.2, 2.1}), 1.5);
  cannot_decide_unless(grid, false, "the axis has one depth");
  EXPECT_EQ(decided(grid).truth, Truth::undecided);
  EXPECT_EQ(decided(grid).outcome(), "cannot decide: the axis has one depth");
}

// Identical seeds (a quantity fixed by construction) make a point; so do seeds that all diverged the same way.
TEST(SeedRule, SeedsWithoutSpreadDecideAsAPoint) {
  EXPECT_EQ(decided(claim_above("A", "x", "x", values({2.0, 2.0, 2.0}), 1.5)).truth, Truth::holds);
  EXPECT_EQ(decided(claim_above("A", "x", "x", values({INFINITY, INFINITY}), 1.5)).truth, Truth::holds);
  EXPECT_EQ(decided(claim_above("A", "x", "x", values({INFINITY, 2.0}), 1.5)).truth, Truth::unclear);
}

std::vector<SubClaim> with_truths(std::vector<Truth> truths) {
  std::vector<SubClaim> claims;
  for (size_t i = 0; i < truths.size(); ++i) {
    claims.push_back(claim_above(std::string(1, char('A' + i)), "x", "x", values({1, 2}), 0));
    claims.back().truth = truths[i];
  }
  return claims;
}

TEST(SeedRule, FiveVerdicts) {
  const Truth yes = Truth::holds, no = Truth::fails, unclear = Truth::unclear, missing = Truth::undecided;
  EXPECT_EQ(combine_verdicts(with_truths({yes, yes})), "reproduced");
  EXPECT_EQ(combine_verdicts(with_truths({yes, no})), "partly reproduced");
  EXPECT_EQ(combine_verdicts(with_truths({no, no})), "not reproduced");
  EXPECT_EQ(combine_verdicts(with_truths({yes, unclear})), "inconclusive");
  EXPECT_EQ(combine_verdicts(with_truths({no, unclear})), "inconclusive");
  EXPECT_EQ(combine_verdicts(with_truths({yes, missing})), "incomplete");
  EXPECT_EQ(combine_verdicts(with_truths({unclear, missing})), "incomplete");
  EXPECT_EQ(combine_verdicts({}), "incomplete");
  // A sub-claim its runs cannot decide (a model that did not train) is a result: inconclusive, not a rerun.
  std::vector<SubClaim> stalled = with_truths({yes, missing});
  cannot_decide_unless(stalled.back(), false, "pre did not train on every seed");
  EXPECT_EQ(combine_verdicts(stalled), "inconclusive");
  stalled.front().truth = no;
  EXPECT_EQ(combine_verdicts(stalled), "inconclusive");
  EXPECT_EQ(ids_where(with_truths({yes, no, no}), Truth::fails), "B, C");
}

TEST(SeedRule, SeedValuesShowMeanSdAndWhatIsMissing) {
  EXPECT_EQ(values({1.0, 2.0, 3.0}).show(), "2.000 ± 1.000 (3 seeds)");
  EXPECT_EQ(values({1.5}).show(), "1.500 (1 seed)");
  EXPECT_EQ(values({1.0, NAN, NAN}).show(), "n/a (seeds 2, 3 missing)");
  EXPECT_TRUE(std::isnan(values({1.0, NAN}).mean()));
  EXPECT_TRUE(std::isnan(values({1.0, INFINITY}).sd()));
}

}  // namespace
}  // namespace normlab::study
