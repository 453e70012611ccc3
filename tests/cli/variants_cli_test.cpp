// `normlab variants` and `normlab init-report`: what a user reads to check a placement against its paper.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "model/placement.h"
#include "train/tiny_corpus.h"

namespace normlab::cli {
namespace {

using train::testing::run_cli;
using train::testing::TempDir;

TEST(CliVariants, ListsEveryPlacementWithPaperEquationsAndSwitches) {
  TempDir tmp("cli");
  const auto r = run_cli({"variants"}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const model::Placement* p : model::all_placements()) {
    EXPECT_NE(r.out.find(std::string(p->name) + "\n    paper:      " + std::string(p->paper)), std::string::npos)
        << p->name;
    EXPECT_NE(r.out.find(std::string(p->equations)), std::string::npos) << p->name;
    for (const model::Switch& s : p->switches)
      EXPECT_NE(r.out.find(std::string(s.name) + " = "), std::string::npos) << s.name;
  }
  for (const model::Switch& s : model::common_switches())
    EXPECT_NE(r.out.find(std::string(s.name) + " = "), std::string::npos);
  // Paper-vs-code choices are stated.
  EXPECT_NE(r.out.find("fairseq's post-W_O form"), std::string::npos);
  // Every placement states its default init and where it comes from, the code-derived defaults included.
  for (const model::Placement* p : model::all_placements()) {
    const size_t at = r.out.find(std::string(p->name) + "\n    paper:");
    ASSERT_NE(at, std::string::npos) << p->name;
    const std::string block = r.out.substr(at, r.out.find("\n\n", at) - at);
    EXPECT_NE(block.find("\n    init:       "), std::string::npos) << block;
    EXPECT_NE(block.find("\n    init from:  "), std::string::npos) << block;
  }
  for (const char* source : {"trunc_normal_ at ±3σ", "full_megatron", "scales the token embedding by √d",
                             "a scalar initialized to √d", "unit variance", "normlab's default is GPT-2's"})
    EXPECT_NE(r.out.find(source), std::string::npos) << source;
  EXPECT_NE(r.out.find("init.head = auto"), std::string::npos);
}

TEST(CliVariants, ShowsOnePlacementAndRefusesUnknownOnes) {
  TempDir tmp("cli");
  const auto r = run_cli({"variants", "deepnorm"}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("α = (2L)^(1/4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("deepnorm_init = \"paper\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\npre\n"), std::string::npos);
  const auto bad = run_cli({"variants", "deepnrom"}, tmp.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown placement 'deepnrom'"), std::string::npos) << bad.err;
}

// The realized std of each matrix, as init-report --json prints it.
std::map<std::string, double> report_std(const std::vector<std::string>& sets, const TempDir& tmp) {
  std::vector<std::string> args{"init-report", "--json"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  const auto r = run_cli(args, tmp.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, double> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    out[j["name"].get<std::string>()] = j["std"].get<double>();
  }
  return out;
}

TEST(CliInitReport, RealizesDeepNormsBetaAndTheScaledInit) {
  TempDir tmp("cli");
  const int layers = 24, d = 256;
  auto deepnorm =
      report_std({"model.placement=deepnorm", "model.n_layers=24", "model.d_model=256", "model.d_ff=256"}, tmp);
  const double xavier = std::sqrt(2.0 / (d + d)), beta = std::pow(8.0 * layers, -0.25);
  EXPECT_NEAR(deepnorm.at("layers.5.attn.q.weight"), xavier, 0.03 * xavier);                // gain 1 on q
  EXPECT_NEAR(deepnorm.at("layers.5.attn.v.weight"), beta * xavier, 0.03 * beta * xavier);  // gain β on v
  EXPECT_NEAR(deepnorm.at("layers.23.ffn.fc2.weight"), beta * xavier, 0.03 * beta * xavier);
  EXPECT_EQ(deepnorm.at("layers.0.attn.post_norm.weight"), 0.0);  // gains are constant 1

  auto scaled = report_std({"model.init.scheme=scaled", "model.n_layers=6"}, tmp);
  EXPECT_NEAR(scaled.at("layers.2.attn.o.weight"), 0.02 / std::sqrt(12.0), 0.002);
  EXPECT_NEAR(scaled.at("layers.2.attn.q.weight"), 0.02, 0.002);
}

// The vocabulary is the configured corpus's, as in training: it sets the untied head's Xavier std √(2/(V+d)).
TEST(CliInitReport, TakesTheVocabularyFromTheDataDirectory) {
  TempDir tmp("cli");
  const std::vector<std::string> head = {"model.tied_embeddings=false",
                                         "model.init.scheme=xavier",
                                         "model.d_model=64",
                                         "model.n_heads=4",
                                         "model.d_ff=128",
                                         "model.n_layers=2"};
  std::vector<std::string> sets = head;
  sets.push_back("data.dir=" + train::testing::tiny_data_dir().string());
  const double tiny = std::sqrt(2.0 / (train::testing::kTinyVocab + 64));
  EXPECT_NEAR(report_std(sets, tmp).at("lm_head.weight"), tiny, 0.05 * tiny);

  // Without a prepared corpus it says which vocabulary it assumed.
  std::vector<std::string> args = {"init-report"};
  for (const auto& s : head) args.insert(args.end(), {"--set", s});
  args.insert(args.end(), {"--set", "data.dir=" + (tmp / "nowhere").string()});
  const auto r = run_cli(args, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("V = 4096"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("nowhere has no meta.json, so the vocabulary is taken as 4096"), std::string::npos) << r.err;
}

TEST(CliInitReport, TableNamesThePlacementsRule) {
  TempDir tmp("cli");
  const auto r = run_cli({"init-report", "--set", "model.placement=subln"}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rule: v, o, fc1, gate, fc2 (weights and biases) × γ = √(ln 2L)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layers.0.attn.inner_norm.weight"), std::string::npos);
}

}  // namespace
}  // namespace normlab::cli
