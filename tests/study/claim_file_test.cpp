// A claim as a file (`normlab study @FILE`): the worked examples in examples/claims/ run and report like a built-in
// study, and a bad file fails before anything runs with one sentence naming the file and the field.
#include <gtest/gtest.h>

#include <regex>

#include "common/error.h"
#include "study/claim_file.h"
#include "study/synthetic_runs.h"

namespace normlab::study {
namespace {

using namespace testing;
using train::testing::run_cli;
using train::testing::slurp;
using train::testing::spit;
using train::testing::TempDir;
using train::testing::tiny_data_dir;

// A claim with two arms and one sub-claim comparing their final losses; `edit` changes it before it is written.
Json good_claim() {
  return Json::parse(R"({
    "name": "mine", "title": "t", "claim": "c", "source": "s",
    "set": {"model.n_layers": 2, "train.steps": 20},
    "arms": [{"id": "post", "label": "Post-LN", "set": {"model.placement": "post"}},
             {"id": "pre", "label": "Pre-LN", "set": {"model.placement": "pre"}}],
    "sub_claims": [{"id": "A", "statement": "Post-LN ends above Pre-LN",
                    "of": {"arm": "post", "statistic": "final_train_loss"},
                    "against": {"arm": "pre", "statistic": "final_train_loss"},
                    "compare": "difference", "side": "above", "threshold": 0.2}]})");
}

std::string error_of(const Json& claim, const TempDir& tmp) {
  const fs::path file = tmp / "claim.json";
  spit(file, claim.dump(2));
  try {
    read_claim_file(file);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

void expect_error(const Json& claim, std::initializer_list<std::string_view> fragments) {
  TempDir tmp("claim");
  const std::string message = error_of(claim, tmp);
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one sentence: " << message;
  EXPECT_NE(message.find("claim.json: "), std::string::npos) << message;
  for (std::string_view f : fragments)
    EXPECT_NE(message.find(f), std::string::npos) << "lacks \"" << f << "\": " << message;
}

TEST(ClaimFile, AGoodClaimPlansEachArmOnEverySeed) {
  TempDir tmp("claim");
  ASSERT_EQ(error_of(good_claim(), tmp), "accepted");
  const auto claim = read_claim_file(tmp / "claim.json");
  const Study& study = study_of(*claim);
  EXPECT_EQ(study.name, "mine");
  StudyOptions options;
  options.seeds = {1, 2};
  const std::vector<RunRequest> plan = plan_study(study, options);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].id, "post-s1");
  EXPECT_EQ(plan[3].id, "pre-s2");
  EXPECT_EQ(plan[0].config["model"]["placement"], "post");
  EXPECT_EQ(plan[0].config["model"]["n_layers"], 2);
  EXPECT_EQ(plan[3].config["train"]["seed"], 2);
  EXPECT_NE(sub_claims_rule(study, options).find("A: final training loss"), std::string::npos)
      << "the rule is written from the sub-claim's data";
}

TEST(ClaimFile, AnUnknownStatisticIsNamed) {
  Json c = good_claim();
  c["sub_claims"][0]["of"]["statistic"] = "final_loss";
  expect_error(c, {"sub_claims[0].of.statistic", "\"final_loss\" is not a statistic", "final_train_loss"});
}

TEST(ClaimFile, AnArmNoArmHasIsNamed) {
  Json c = good_claim();
  c["sub_claims"][0]["against"]["arm"] = "peri";
  expect_error(c, {"sub_claims[0].against.arm", "\"peri\" is not one of the study's arms (post, pre)"});
}

TEST(ClaimFile, AValueOfTheWrongTypeIsNamed) {
  Json c = good_claim();
  c["sub_claims"][0]["threshold"] = "high";
  expect_error(c, {"sub_claims[0].threshold", "expected a number"});
  c = good_claim();
  c["arms"][0]["label"] = 7;
  expect_error(c, {"arms[0].label", "expected a non-empty text"});
  c = good_claim();
  c["sub_claims"][0]["of"]["args"] = {{"layer", "last"}};
  expect_error(c, {"sub_claims[0].of.args.layer", "statistic final_train_loss has no such parameter"});
  c = good_claim();
  c["sub_claims"][0]["side"] = "within";
  expect_error(c, {"sub_claims[0].threshold", "takes [lo, hi]"});
}

// A count (the sign test) and a control at init are data too, checked like the rest.
TEST(ClaimFile, TheTestAndTheInitControlAreChecked) {
  Json c = good_claim();
  c["sub_claims"][0]["test"] = "bootstrap";
  expect_error(c, {"sub_claims[0].test", "\"bootstrap\" is not one of interval, sign"});
  c = good_claim();
  c["sub_claims"][0]["test"] = "sign";
  c["sub_claims"][0]["side"] = "within";
  c["sub_claims"][0]["threshold"] = {0, 1};
  expect_error(c, {"sub_claims[0].test", "the sign test counts seeds on each side of one threshold"});
  c = good_claim();
  c["sub_claims"][0]["at_init"] = {{"of", {{"arm", "post"}, {"statistic", "final_train_loss"}}}};
  expect_error(c, {"sub_claims[0].at_init", "the control compares as the sub-claim does"});
  c = good_claim();
  c["sub_claims"][0]["at_init"] = {{"of", {{"arm", "post"}, {"statistic", "nope"}}},
                                   {"against", {{"arm", "pre"}, {"statistic", "final_train_loss"}}}};
  expect_error(c, {"sub_claims[0].at_init.of.statistic", "\"nope\" is not a statistic"});
}

TEST(ClaimFile, MissingAndUnknownFieldsAreNamed) {
  Json c = good_claim();
  c["sub_claims"][0].erase("threshold");
  expect_error(c, {"sub_claims[0].threshold: missing"});
  c = good_claim();
  c["arms"][1]["sett"] = Json::object();
  expect_error(c, {"arms[1].sett: unknown field", "id, label, set, kind, analyses"});
  c = good_claim();
  c["sub_claims"][0].erase("compare");
  expect_error(c, {"sub_claims[0]", "\"against\" needs \"compare\""});
  c = good_claim();
  c.erase("arms");
  expect_error(c, {"arms: expected a non-empty list"});
}

TEST(ClaimFile, NamesIdsAndConfigsAreChecked) {
  Json c = good_claim();
  c["name"] = "why-pre-ln";
  expect_error(c, {"name", "is a built-in study"});
  c = good_claim();
  c["arms"][1]["id"] = "post";
  expect_error(c, {"arms[1].id", "\"post\" is the id of an earlier arm"});
  c = good_claim();
  c["arms"][0]["id"] = "../x";
  expect_error(c, {"arms[0].id", "names run folders"});
  c = good_claim();
  c["arms"][0]["set"] = {{"model.placment", "post"}};
  expect_error(c, {"arms[0].set", "placment"});
  c = good_claim();
  c["sub_claims"][0]["statement"] = "";
  expect_error(c, {"sub_claims[0].statement"});
}

TEST(ClaimFile, NotJsonIsRefusedNamingTheFile) {
  TempDir tmp("claim");
  spit(tmp / "broken.json", "{\"name\": ");
  try {
    read_claim_file(tmp / "broken.json");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json"), std::string::npos) << e.what();
  }
}

// Each worked example runs at --quick on the small test corpus and writes a report with a verdict and its rule.
class ClaimExample : public ::testing::TestWithParam<std::string> {};

TEST_P(ClaimExample, RunsAndReportsAtTheQuickPreset) {
  TempDir tmp("claim");
  const fs::path file = fs::path(NORMLAB_SOURCE_DIR) / "examples" / "claims" / (GetParam() + ".json");
  const auto r = run_cli({"study", fmt::format("@{}", file.string()), "--quick", "--out", (tmp / "out").string(),
                          "--set", "data.dir=" + tiny_data_dir().string(), "--jobs", "2"},
                         tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = slurp(tmp / "out" / "report.md");
  EXPECT_TRUE(
      std::regex_search(md, std::regex("## Verdict: (reproduced|partly reproduced|not reproduced|inconclusive)")))
      << md;
  EXPECT_NE(md.find("**Rule.** A: "), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(tmp / "out" / "report.html"));
}

INSTANTIATE_TEST_SUITE_P(Examples, ClaimExample,
                         ::testing::Values("formula-trains-deep", "peri-bounds-activations", "post-grad-flat-in-depth"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace normlab::study
