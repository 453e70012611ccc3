// results/README.md, the findings index: one row per study from the reports kept under results/<study>/, the
// design seeds' and the fresh seeds' verdicts side by side, the headline effect with its interval.
#include <gtest/gtest.h>

#include "study/findings.h"
#include "study/kit.h"
#include "train/tiny_corpus.h"

namespace normlab::study {
namespace {

namespace fs = std::filesystem;
using train::testing::TempDir;

// A why-pre-ln report on `seeds` whose sub-claims have the given outcomes.
void kept_report(const fs::path& dir, std::vector<int> seeds, std::vector<Truth> truths, const std::string& preset) {
  Report r{.name = "why-pre-ln", .title = "t", .claim = "c", .source = "s"};
  for (size_t i = 0; i < truths.size(); ++i) {
    SeedValues v{seeds, {}};
    for (size_t k = 0; k < seeds.size(); ++k) v.values.push_back(1.0 + 0.1 * double(k) + double(i));
    r.claims.push_back(claim_above(i == 0 ? "A1" : "B1", "statement " + std::to_string(i), "statistic", v, 0.5));
    decide(r.claims.back(), SeedSchedule{4});
    r.claims.back().truth = truths[i];
  }
  r.headline = "B1";
  r.verdict = combine_verdicts(r.claims);
  r.record = {{"preset", preset},    {"seeds", seeds},       {"d_model", {64}},
              {"n_layers", {6, 24}}, {"train_steps", {500}}, {"core_hours", 0.25}};
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

}  // namespace
}  // namespace normlab::study
