// results/README.md, the findings index: one row per study from the reports kept under results/<study>/, the
// design seeds' and the fresh seeds' verdicts side by side, the headline effect with its interval.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "study/findings.h"
#include "study/kit.h"
#include "study/ladder.h"
#include "study/studies.h"
#include "train/tiny_corpus.h"

namespace normlab::study {
namespace {

namespace fs = std::filesystem;
using train::testing::TempDir;

// A why-pre-ln report on `seeds` whose sub-claims have the given outcomes.
void kept_report(const fs::path& dir, std::vector<int> seeds, std::vector<Truth> truths, const std::string& preset,
                 double core_hours = 0.25) {
  Report r{.name = "why-pre-ln", .title = "t", .claim = "c", .source = "s"};
  for (size_t i = 0; i < truths.size(); ++i) {
    SeedValues v{seeds, {}};
    for (size_t k = 0; k < seeds.size(); ++k) v.values.push_back(1.0 + 0.1 * double(k) + double(i));
    r.claims.push_back(claim_above(i == 0 ? "A1" : "B1", "statement " + std::to_string(i), "statistic", v, 0.5));
    decide(r.claims.back(), SeedSchedule{4}.alpha());
    r.claims.back().truth = truths[i];
  }
  r.headline = "B1";
  r.verdict = combine_verdicts(r.claims);
  r.record = {{"preset", preset},    {"seeds", seeds},       {"d_model", {64}},
              {"n_layers", {6, 24}}, {"train_steps", {500}}, {"core_hours", core_hours}};
  write_report(dir, r);
}

TEST(FindingsIndex, OneRowPerStudyWithBothSeedSetsAndTheHeadlineInterval) {
  TempDir tmp("findings");
  kept_report(tmp / "why-pre-ln" / "design", {1, 2, 3, 4, 5}, {Truth::holds, Truth::fails}, "default");
  kept_report(tmp / "why-pre-ln" / "fresh", {101, 102, 103}, {Truth::holds, Truth::holds}, "default");
  kept_report(tmp / "why-pre-ln" / "large", {1, 2, 3}, {Truth::holds, Truth::unclear}, "large");
  const std::string md = findings_index(tmp.path());
  EXPECT_EQ(md, findings_index(tmp.path())) << "the same reports give the same bytes";
  EXPECT_NE(md.find("**partly reproduced** (fails: B1), seeds 1–5"), std::string::npos) << md;
  EXPECT_NE(md.find("**reproduced**, seeds 101–103"), std::string::npos) << md;
  EXPECT_NE(md.find("| B1: 2.200 ["), std::string::npos) << md;  // the headline's mean on the design seeds
  EXPECT_NE(md.find("d 64, 6–24 layers, 500 steps | 0.50 |"), std::string::npos) << md;
  EXPECT_NE(md.find("**inconclusive** (unclear: B1), seeds 1–3"), std::string::npos) << "the large preset's row";
  EXPECT_NE(md.find("| [grad-by-depth](grad-by-depth/) |"), std::string::npos) << "every study has a row";
  EXPECT_NE(md.find("| not run | not run |"), std::string::npos) << md;
  EXPECT_NE(md.find("- `why-pre-ln` B1: statement 1"), std::string::npos) << md;
}

// A count pooled over the sets puts the seeds on the claimed side first, as each set's cell does, for a claim below
// its threshold too: the two columns must read the same way round.
TEST(FindingsIndex, ACountPooledOverTheSetsPutsTheClaimedSideFirst) {
  TempDir tmp("findings-count");
  const auto count_report = [](const fs::path& dir, std::vector<int> seeds, std::vector<double> values) {
    Report r{.name = "why-pre-ln", .title = "t", .claim = "c", .source = "s"};
    SubClaim c = claim_below("B1", "statement", "did not train (1) or trained (0)", SeedValues{seeds, values}, 0.5);
    c.test = SubClaim::Test::sign;
    decide(c, SeedSchedule{1}.alpha());
    r.claims.push_back(c);
    r.headline = "B1";
    r.verdict = combine_verdicts(r.claims);
    r.record = {{"preset", "default"}, {"seeds", seeds},       {"d_model", {64}},
                {"n_layers", {6}},     {"train_steps", {500}}, {"core_hours", 0.1}};
    write_report(dir, r);
  };
  count_report(tmp / "why-pre-ln" / "design", {1, 2, 3}, {0, 0, 1});
  count_report(tmp / "why-pre-ln" / "fresh", {101, 102, 103, 104}, {0, 0, 0, 0});
  const std::string md = findings_index(tmp.path());
  EXPECT_NE(md.find("| 2 vs 1 seeds, p = "), std::string::npos) << md;
  EXPECT_NE(md.find("| 6 vs 1 of 7 seeds, p = "), std::string::npos) << md;
}

// A failing sub-claim is listed with what it measured at its setting and what the study's large preset would cost,
// priced at the core-seconds per layer-step of the flagship's kept large run (here 1 core-hour for its own plan).
TEST(FindingsIndex, ListsEachFailingSubClaimWithItsSettingAndTheLargePresetsPrice) {
  TempDir tmp("findings");
  kept_report(tmp / "why-pre-ln" / "design", {1, 2, 3, 4, 5}, {Truth::holds, Truth::fails}, "default");
  kept_report(tmp / "why-pre-ln" / "fresh", {101, 102, 103}, {Truth::holds, Truth::holds}, "default");
  const std::string unpriced = findings_index(tmp.path());
  kept_report(tmp / "why-pre-ln" / "large", {1, 2, 3}, {Truth::holds, Truth::unclear}, "large", 1.0);
  const std::string md = findings_index(tmp.path());
  const size_t section = md.find("\n## Not reproduced at this setting\n");
  ASSERT_NE(section, std::string::npos) << md;
  const size_t row = md.find("| [why-pre-ln](why-pre-ln/) | design, seeds 1–5 | B1: statement 1 | 2.200 [", section);
  ASSERT_NE(row, std::string::npos) << md;
  EXPECT_NE(md.find("] | > 0.500 | d 64, 6–24 layers, 500 steps | ", row), std::string::npos) << md;
  EXPECT_NE(md.find(" layer-steps ≈ 1.0 core-hours |", section), std::string::npos) << md;
  EXPECT_EQ(md.find("| fresh, seeds", section), std::string::npos) << "nothing fails on the fresh seeds";
  EXPECT_EQ(md.find("A1: statement 0", section), std::string::npos) << "A1 holds";
  EXPECT_NE(unpriced.find(" layer-steps |"), std::string::npos) << "without a kept large run, layer-steps only";
  EXPECT_EQ(unpriced.find("core-hours |", unpriced.find("## Not reproduced")), std::string::npos) << unpriced;

  TempDir none("findings-none");
  kept_report(none / "why-pre-ln" / "design", {1, 2, 3}, {Truth::holds, Truth::holds}, "default");
  EXPECT_EQ(findings_index(none.path()).find("## Not reproduced"), std::string::npos) << "nothing fails";
}

// A ladder kept as results/<study>/ladder (its ladder.json, as ladder_report writes it) is listed with each sub-claim's
// trend, its slope interval and the first rung where it holds; a study without one has no row.
TEST(FindingsIndex, ListsEachKeptLaddersTrendAndFirstHoldingRung) {
  TempDir tmp("findings-ladder");
  kept_report(tmp / "why-pre-ln" / "design", {1, 2, 3}, {Truth::holds, Truth::holds}, "default");
  EXPECT_EQ(findings_index(tmp.path()).find("## Ladders"), std::string::npos) << "no ladder kept";
  const Study& study = find_study("why-pre-ln");
  StudyOptions base{.dir = tmp / "why-pre-ln" / "ladder"};
  base.seeds = {1, 2, 3};
  const Ladder ladder = plan_ladder(study, base, "model.n_layers=6,12,24");
  std::vector<StudyResult> rungs;
  for (double rung : {0.0, 1.0, 2.0}) {  // B1's effect grows by about 1 a doubling: approaching, holds from 24
    SubClaim c =
        claim_above("B1", "Post-LN stalls", "not_trained", SeedValues{{1, 2, 3}, {rung, rung + 0.1, rung - 0.1}}, 1.5);
    decide(c, SeedSchedule{1}.alpha());
    rungs.push_back({.verdict = combine_verdicts({c}), .claims = {c}});
  }
  write_report(base.dir, ladder_report(study, base, ladder, rungs), "ladder");
  const std::string md = findings_index(tmp.path());
  const size_t section = md.find("\n## Ladders: the trend toward the paper's scale\n");
  ASSERT_NE(section, std::string::npos) << md;
  EXPECT_NE(md.find("| [why-pre-ln](why-pre-ln/ladder/ladder.md) | model.n_layers ∈ {6, 12, 24}, seeds 1,2,3 | B1: "
                    "Post-LN stalls | approaching the paper's regime, slope 1.443 [",
                    section),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("] | 24 |", section), std::string::npos) << md;

  // The same ladder on another seed set, kept beside it as ladder-unseen, gets rows of its own after the first.
  base.dir = tmp / "why-pre-ln" / "ladder-unseen";
  base.seeds = {1001, 1002, 1003};
  for (StudyResult& r : rungs) r.claims[0].values.seeds = base.seeds;
  write_report(base.dir, ladder_report(study, base, ladder, rungs), "ladder");
  const std::string both = findings_index(tmp.path());
  const size_t unseen = both.find(
      "| [why-pre-ln](why-pre-ln/ladder-unseen/ladder.md) | model.n_layers ∈ {6, 12, 24}, seeds 1001,1002,1003 | B1");
  ASSERT_NE(unseen, std::string::npos) << both;
  EXPECT_LT(both.find("(why-pre-ln/ladder/ladder.md)"), unseen) << both;
}

// What the repository keeps (issue: findings a researcher can cite): every study's design and fresh seed sets, each
// with its report, and every run behind them naming the commit that made it (a git hash, not "unknown" or missing).
TEST(KeptResults, EveryStudyHasBothSeedSetsAndEachRunNamesItsCommit) {
  const fs::path results = fs::path(NORMLAB_SOURCE_DIR) / "results";
  // A design run may come from a build of an uncommitted tree (marked -dirty: a pilot); an unseen one may not
  // (Preregistration.KeptUnseenSetsFollowTheirFreeze).
  const std::regex commit("[0-9a-f]{7,40}(-dirty)?");
  for (const Study* s : all_studies())
    for (const char* set : {"design", "fresh"}) {
      const fs::path dir = results / s->name / set;
      EXPECT_TRUE(fs::exists(dir / "report.json")) << dir;
      size_t runs = 0;
      for (const auto& run : fs::directory_iterator(dir / "runs")) {
        std::ifstream in(run.path() / "status.json");
        ASSERT_TRUE(in) << run.path() << ": no status.json";
        const std::string made_by = Json::parse(in).value("normlab", std::string("not recorded"));
        EXPECT_TRUE(std::regex_match(made_by, commit)) << run.path() << " was made by \"" << made_by << '"';
        ++runs;
      }
      EXPECT_GT(runs, 0u) << dir;
    }
}

}  // namespace
}  // namespace normlab::study
