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
