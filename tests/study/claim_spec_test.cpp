// A sub-claim as data (study/claim_spec.h): templates filled from the study's variables, a term over several arms
// (the worst or the best cell of a grid) and the checks that refuse what cannot be measured.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "study/claim_spec.h"
#include "study/kit.h"
#include "study/synthetic_runs.h"

namespace normlab::study {
namespace {

using namespace testing;
using train::testing::TempDir;
namespace fs = std::filesystem;

const Json kVariables = {{"deep", 12}, {"lr", {0.001, 0.003}}, {"warmup", {0, 150}}};

TEST(ClaimSpec, FillJoinsAListAndExpandTakesEveryCombination) {
  EXPECT_EQ(fill("Pre-LN, {deep} layers, lr {lr}", kVariables, "test"), "Pre-LN, 12 layers, lr 0.001, 0.003");
  EXPECT_EQ(expand("pre-L{deep}-lr{lr}-w{warmup}", kVariables, "test"),
            (std::vector<std::string>{"pre-L12-lr0.001-w0", "pre-L12-lr0.001-w150", "pre-L12-lr0.003-w0",
                                      "pre-L12-lr0.003-w150"}));
  EXPECT_EQ(expand("post-L{deep}", kVariables, "test"), std::vector<std::string>{"post-L12"});
  EXPECT_TRUE(expand("pre-lr{lr}", {{"lr", Json::array()}}, "test").empty());
  EXPECT_THROW(expand("pre-{nothing}", kVariables, "test"), Error);
}

// The arms a sub-claim cannot be measured without: both terms (a term over a list variable gives every arm), the
// control at init and the conditions on runs, each once.
TEST(ClaimSpec, ArmsReadAreEveryTermsTheControlsAndTheConditionsArmsEachOnce) {
  ClaimSpec spec{.id = "A",
                 .statement = "s",
                 .of = {"post-L{deep}", "final_train_loss"},
                 .against = Term{"pre-lr{lr}", "final_train_loss", {}, Extreme::largest},
                 .compare = Compare::difference,
                 .at_init = InitControl{{"init-post", "final_train_loss"}, Term{"post-L{deep}", "final_train_loss"}},
                 .runs_must = {{"ref", RunMust::train}}};
  EXPECT_EQ(arms_read(spec, kVariables),
            (std::vector<std::string>{"post-L12", "pre-lr0.001", "pre-lr0.003", "init-post", "ref"}));
  spec.against.reset(), spec.at_init.reset(), spec.runs_must.clear();
  EXPECT_EQ(arms_read(spec, kVariables), std::vector<std::string>{"post-L12"});
}

// The runs of arms pre-lr0.001 and pre-lr0.003 on seeds 1 and 2, trained to the given final losses (NaN: missing).
std::vector<RunOutcome> runs_with(const TempDir& tmp, const std::map<std::string, double>& losses) {
  std::vector<RunOutcome> runs;
  for (const auto& [id, loss] : losses) {
    Json config = small_lm("pre", 2, 80, 1);
    config["data"]["dir"] = train::testing::tiny_data_dir().string();
    RunOutcome o{{id, config}, tmp / id, RunStatus::finished, "", 1.0, resolve_config(config, id)};
    fs::create_directories(o.dir / "run");
    if (!std::isnan(loss)) write_trained(o, loss);
    runs.push_back(o);
  }
  return runs;
}

TEST(ClaimSpec, ATermOverSeveralArmsTakesItsExtremeAndIsNaNWhenAnArmIsMissing) {
  TempDir tmp("claim-spec");
  const std::vector<RunOutcome> runs = runs_with(
      tmp, {{"pre-lr0.001-s1", 4.0}, {"pre-lr0.003-s1", 4.5}, {"pre-lr0.001-s2", 3.0}, {"pre-lr0.003-s2", NAN}});
  const Json lr = {{"lr", {0.001, 0.003}}};
  const SeedValues worst = measure_term({"pre-lr{lr}", "final_train_loss", {}, Extreme::largest}, lr, runs, {1, 2});
  const SeedValues best = measure_term({"pre-lr{lr}", "final_train_loss", {}, Extreme::smallest}, lr, runs, {1, 2});
  EXPECT_NEAR(worst.values[0], 4.5, 1e-12);
  EXPECT_NEAR(best.values[0], 4.0, 1e-12);
  EXPECT_TRUE(std::isnan(worst.values[1])) << "a missing cell decides nothing";
  EXPECT_NEAR(measure_term({"pre-lr0.001", "final_train_loss"}, Json::object(), runs, {2}).values[0], 3.0, 1e-12);
}

// By mean, one arm is chosen for every seed: lr 0.001 has the lower mean (3.5 against 4.0) though seed 1 is better at
// lr 0.003, so the best arm's values are lr 0.001's on both seeds, not each seed's smallest.
TEST(ClaimSpec, ATermChosenByMeanReadsOneArmOnEverySeed) {
  TempDir tmp("claim-spec");
  const std::vector<RunOutcome> runs = runs_with(
      tmp, {{"pre-lr0.001-s1", 4.5}, {"pre-lr0.003-s1", 4.0}, {"pre-lr0.001-s2", 2.5}, {"pre-lr0.003-s2", 4.0}});
  const Json lr = {{"lr", {0.001, 0.003}}};
  const Term best{"pre-lr{lr}", "final_train_loss", {}, Extreme::lowest_mean};
  const Term worst{"pre-lr{lr}", "final_train_loss", {}, Extreme::highest_mean};
  EXPECT_EQ(chosen_arm(best, lr, runs, {1, 2}), "pre-lr0.001");
  EXPECT_EQ(chosen_arm(worst, lr, runs, {1, 2}), "pre-lr0.003");
  const SeedValues values = measure_term(best, lr, runs, {1, 2});
  EXPECT_NEAR(values.values[0], 4.5, 1e-12);
  EXPECT_NEAR(values.values[1], 2.5, 1e-12);
  EXPECT_NEAR(measure_term({"pre-lr{lr}", "final_train_loss", {}, Extreme::smallest}, lr, runs, {1, 2}).values[0], 4.0,
              1e-12)
      << "seed by seed, the smallest is lr 0.003's on seed 1";
  TempDir other("claim-spec");
  const std::vector<RunOutcome> missing = runs_with(other, {{"pre-lr0.001-s1", 4.0}, {"pre-lr0.003-s1", NAN}});
  EXPECT_EQ(chosen_arm(best, lr, missing, {1}), "") << "an arm without its numbers: no choice";
  EXPECT_TRUE(std::isnan(measure_term(best, lr, missing, {1}).values[0]));
}

// A comparison with a reference that diverged, or about a model that did not train, decides nothing on any seed, and
// names the seeds.
TEST(ClaimSpec, ARunThatDivergedOrDidNotTrainLeavesTheSubClaimUndecided) {
  TempDir tmp("claim-spec");
  std::vector<RunOutcome> runs = runs_with(tmp, {{"ref-s1", 4.0}, {"ref-s2", 4.0}, {"new-s1", 4.05}, {"new-s2", 4.05}});
  for (RunOutcome& o : runs)
    if (o.request.id == "ref-s2") write_diverged(o);
  const std::vector<ArmSpec> arms = {{"ref", "the reference"}, {"new", "the new model"}};
  ClaimSpec spec{.id = "A",
                 .statement = "the new model matches the reference",
                 .of = {"new", "final_train_loss"},
                 .against = Term{"ref", "final_train_loss"},
                 .compare = Compare::difference,
                 .side = SubClaim::Side::below,
                 .threshold = 0.1,
                 .runs_must = {{"ref", RunMust::not_diverge}}};
  const SubClaim claim = measure_claim(spec, arms, Json::object(), runs, {1, 2});
  EXPECT_EQ(claim.cannot_decide, "the reference diverged on seed 2: no reference to match");
  spec.runs_must = {{"new", RunMust::train}};
  write_stalled(runs[1]);  // new-s2
  EXPECT_EQ(measure_claim(spec, arms, Json::object(), runs, {1, 2}).cannot_decide,
            "the new model did not train on seed 2: its layers are not a trained model's");
  spec.runs_must = {{"nobody", RunMust::train}};
  EXPECT_THROW(check_claim(spec, arms, Json::object(), "test"), Error);
}

// Growth with depth: Var = 0.01 · N² on seed 1 and 0.01 · N on seed 2 over the arms g-L1, g-L2, g-L4 (N = 2L) give
// slopes 2 and 1; an x list of another length is refused.
TEST(ClaimSpec, ALogLogSlopeOverTheArmsFitsEachSeed) {
  TempDir tmp("claim-spec");
  std::map<std::string, double> none;
  for (int l : {1, 2, 4})
    for (int seed : {1, 2}) none[fmt::format("g-L{}-s{}", l, seed)] = NAN;
  std::vector<RunOutcome> runs = runs_with(tmp, none);
  for (RunOutcome& o : runs) {
    const int layers = o.request.id[3] - '0', seed = o.request.id.back() - '0';
    const double n = 2.0 * layers;
    write_analysis(o, "branch-noise", {{"output_change_var", seed == 1 ? 0.01 * n * n : 0.01 * n}});
  }
  const Json v = {{"depth", {1, 2, 4}}, {"N", {2, 4, 8}}};
  const Term growth{"g-L{depth}",
                    "analysis_number",
                    {{"analysis", "branch-noise"}, {"column", "output_change_var"}},
                    Extreme::log_log_slope,
                    "N"};
  const SeedValues slopes = measure_term(growth, v, runs, {1, 2});
  EXPECT_NEAR(slopes.values[0], 2.0, 1e-12);
  EXPECT_NEAR(slopes.values[1], 1.0, 1e-12);
  const std::vector<ArmSpec> arms = {{"g-L{depth}", "G"}};
  ClaimSpec spec{.id = "A", .statement = "G grows linearly", .of = growth, .threshold = 0.5};
  EXPECT_NO_THROW(check_claim(spec, arms, v, "test"));
  EXPECT_THROW(check_claim(spec, arms, Json{{"depth", {1, 2, 4}}, {"N", {2, 4}}}, "test"), Error);
}

TEST(ClaimSpec, ATermNamingSeveralArmsNeedsAnExtremeAndItsRuleSaysWhich) {
  const std::vector<ArmSpec> arms = {{"pre-lr{lr}", "Pre-LN at lr {lr}"}};
  const Json lr = {{"lr", {0.001, 0.003}}};
  ClaimSpec spec{.id = "B",
                 .statement = "Pre-LN trains at every lr",
                 .of = {"pre-lr{lr}", "final_train_loss"},
                 .side = SubClaim::Side::below,
                 .threshold = 5};
  try {
    check_claim(spec, arms, lr, "test");
    ADD_FAILURE() << "a term over two arms without an extreme was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extreme largest or smallest"), std::string::npos) << e.what();
  }
  spec.of.extreme = Extreme::largest;
  EXPECT_EQ(claim_rule(spec, arms, lr),
            "B: final training loss (mean of the last 3 logs; a diverged run counts as the unigram entropy), the "
            "largest over Pre-LN at lr 0.001, 0.003 < 5.000");
}

}  // namespace
}  // namespace normlab::study
