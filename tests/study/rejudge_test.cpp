// The kept runs judged again: every study's design and fresh seed sets under results/, planned as their report.json
// says they were run (the default preset, --seeds auto with its cap, the seeds of the last look) and judged by this
// build from the runs' stored files, nothing run. The verdict and each sub-claim's seeds, n, confidence, side,
// bounds and outcome must be the committed ones byte for byte, and its per-seed values, mean, sd and interval equal
// to 1e-12 of their size: a judge re-expressed in another form, or a statistic moved to a registry, changes no
// number. Not to the bit, because the kept reports were judged by builds on two CPUs whose fused multiply-adds and
// libm move the last bits of slopes, logs and sds (the study layer is now built with -ffp-contract=off,
// CMakeLists.txt). A rule changed on purpose is committed together with its kept reports judged again, which this
// test then pins.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <fmt/ranges.h>

#include "study/kit.h"
#include "study/studies.h"

namespace normlab::study {
namespace {

namespace fs = std::filesystem;

struct KeptSet {
  std::string study, set;
};

std::vector<KeptSet> kept_sets() {
  std::vector<KeptSet> sets;
  for (const Study* s : all_studies())
    for (const char* set : {"design", "fresh"}) sets.push_back({std::string(s->name), set});
  return sets;
}

Json read_json_file(const fs::path& file) {
  std::ifstream in(file);
  return Json::parse(in);
}

// The exact numbers of a sub-claim, without its prose (statement, statistic and threshold text are generated and may
// be reworded; the numbers may not) and without the summaries compared to rounding (summaries_match).
Json exact_numbers(Json claim) {
  for (const char* key :
       {"statement", "statistic", "threshold", "said", "quote", "where", "mean", "sd", "interval", "p_value"})
    claim.erase(key);
  for (auto& [seed, value] : claim["per_seed"].items()) value = value.is_null() ? "missing" : "present";
  if (claim.contains("at_init")) {
    claim["at_init"].erase("mean"), claim["at_init"].erase("statistic");
    for (auto& [seed, value] : claim["at_init"]["per_seed"].items()) value = value.is_null() ? "missing" : "present";
  }
  return claim;
}

void expect_close(const Json& judged, const Json& kept, const std::string& what) {
  ASSERT_EQ(judged.is_null(), kept.is_null()) << what << ": " << judged << " against " << kept;
  if (judged.is_null()) return;
  const double a = judged.get<double>(), b = kept.get<double>();
  EXPECT_NEAR(a, b, 1e-12 * std::max(1.0, std::abs(b))) << what;
}

void expect_summaries_match(const Json& judged, const Json& kept, const std::string& what) {
  for (const auto& [seed, value] : kept["per_seed"].items())
    expect_close(judged["per_seed"][seed], value, what + " seed " + seed);
  expect_close(judged["mean"], kept["mean"], what + " mean");
  expect_close(judged["sd"], kept["sd"], what + " sd");
  expect_close(judged["interval"][0], kept["interval"][0], what + " interval");
  expect_close(judged["interval"][1], kept["interval"][1], what + " interval");
  expect_close(judged["p_value"], kept["p_value"], what + " p-value");
  if (kept.contains("at_init")) expect_close(judged["at_init"]["mean"], kept["at_init"]["mean"], what + " at init");
}

void PrintTo(const KeptSet& kept, std::ostream* os) { *os << kept.study << "/" << kept.set; }

class KeptRunsJudgedAgain : public ::testing::TestWithParam<KeptSet> {};

TEST_P(KeptRunsJudgedAgain, GiveTheCommittedVerdictAndNumbers) {
  const KeptSet& kept = GetParam();
  const fs::path dir = fs::path(NORMLAB_SOURCE_DIR) / "results" / kept.study / kept.set;
  const Json committed = read_json_file(dir / "report.json");
  ASSERT_EQ(committed["preset"], "default") << dir;

  const Study& study = find_study(kept.study);
  StudyOptions options;
  options.dir = dir;
  const std::vector<int> seeds = committed["seeds"].get<std::vector<int>>();
  if (committed["auto_seeds"].get<bool>()) choose_seeds(options, "auto", committed["max_seeds"].get<int>());
  else choose_seeds(options, fmt::format("{}", fmt::join(seeds, ",")), SeedSchedule::kDefaultCap);
  options.seeds = seeds;
  const std::vector<RunRequest> plan = plan_study(study, options);
  const Report report = judge_study(study, options, stored_outcomes(dir, plan, false));

  EXPECT_EQ(report.verdict, committed["verdict"].get<std::string>());
  ASSERT_EQ(report.claims.size(), committed["sub_claims"].size());
  for (size_t i = 0; i < report.claims.size(); ++i) {
    const std::string what = kept.study + "/" + kept.set + " sub-claim " + report.claims[i].id;
    const Json judged = sub_claim_json(report.claims[i]), kept_claim = committed["sub_claims"][i];
    EXPECT_EQ(exact_numbers(judged).dump(), exact_numbers(kept_claim).dump()) << what;
    expect_summaries_match(judged, kept_claim, what);
  }
}

INSTANTIATE_TEST_SUITE_P(Results, KeptRunsJudgedAgain, ::testing::ValuesIn(kept_sets()), [](const auto& info) {
  std::string name = info.param.study + "_" + info.param.set;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
});

}  // namespace
}  // namespace normlab::study
