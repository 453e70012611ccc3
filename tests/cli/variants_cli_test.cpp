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
  sets.push_back(fmt::format("data.dir={}", train::testing::tiny_data_dir().string()));
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

// `normlab variants check`: a placement written as a formula, read, shown as understood, gradient-checked.
std::string example(const std::string& name) {
  return fmt::format("{}/examples/placements/{}.json", NORMLAB_SOURCE_DIR, name);
}

TEST(CliVariantsCheck, PrintsTheFormulaAsUnderstoodAndPassesTheGradientCheck) {
  TempDir tmp("cli");
  const auto r = run_cli({"variants", "check", example("my-deepnorm")}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"formula my-deepnorm (", "attn, cross, ffn:  x' = norm((alpha*x) + branch(x), post_norm)",
                           "let alpha (single stack) = (2*L)^0.25", "final norm: no",
                           "init: v, o, fc1, gate, fc2: Xavier-normal, gain beta",
                           "layers.0.attn.post_norm.weight       [d]        norm_gain  starts at 1"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  for (const char* shape : {"decoder", "encoder", "encoder_decoder"})
    EXPECT_NE(r.out.find(fmt::format("gradient check, {} (", shape)), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": pass"), std::string::npos) << r.out;
  // An expression alone; a formula without cross-attention's equation is not checked as an encoder-decoder.
  const auto bare = run_cli({"variants", "check", "x + rezero*branch(x)"}, tmp.path());
  EXPECT_EQ(bare.exit_code, 1);  // rezero is not declared: an unknown name
  const auto two = run_cli({"variants", "check", fmt::format("@{}", example("shortcut-over-sqrt-l"))}, tmp.path());
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.out.find("ffn:               x' = norm((x/sqrt(l)) + branch(x), post_norm)"), std::string::npos)
      << two.out;
}

TEST(CliVariantsCheck, RefusesEachKindOfMistakeWithItsPosition) {
  TempDir tmp("cli");
  struct Bad {
    std::string formula;  // an expression, or a file's content
    bool file;
    std::vector<std::string> fragments;
    std::string caret;  // the picture's pointer line, for a mistake inside an expression
  };
  const std::vector<Bad> cases = {
      {"norm(x + branch(x)", false, {"column 19", "expected ')' to close norm("}, "                    ^"},
      {"norm(x + brnch(x))", false, {"column 10", "unknown verb 'brnch'"}, "           ^"},
      {"x + branch(norm(x, foo_norm))", false, {"column 20", "unknown norm site 'foo_norm'"}, "                     ^"},
      {"x + 2", false, {"column 3", "'+' between a tensor and a number"}, "    ^"},
      {"branch(x) + branch(x)", false, {"column 13", "calls branch(...) a second time"}, "              ^"},
      {R"j({"name": "f", "sublayer": "x + branch(norm(x))", "init": [{"roles": ["vv"], "scale": "2"}]})j",
       true,
       {"init[0].roles: unknown role 'vv'"},
       ""},
      {R"j({"name": "f", "sublayer": "x + branch(norm(x))", "sublayr": 1})j", true, {"unknown key 'sublayr'"}, ""},
      {R"j({"name": "f", "sublayer": )j", true, {"not valid JSON", "line 1"}, ""},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Bad& b = cases[i];
    SCOPED_TRACE(b.formula);
    std::string arg = b.formula;
    if (b.file) {
      arg = (tmp / fmt::format("bad{}.json", i)).string();
      train::testing::spit(arg, b.formula);
    }
    const auto r = run_cli({"variants", "check", arg}, tmp.path());
    train::testing::expect_cli_error(r, {});
    for (const std::string& f : b.fragments) EXPECT_NE(r.err.find(f), std::string::npos) << f << "\n" << r.err;
    if (!b.caret.empty()) {
      EXPECT_NE(r.err.find(fmt::format("\n{}\n", b.caret)), std::string::npos) << r.err;
    }
  }
  const auto missing = run_cli({"variants", "check", "no-such.json"}, tmp.path());
  train::testing::expect_cli_error(missing, {"formula file no-such.json does not exist"});
}

// Issue 47.6: what the formula checks used to let through or say too little about. A division by zero is "not finite"
// at its column (not a gradient check failing on NaN); a check that could check no shape exits non-zero; an init
// rule's role that no parameter has is refused; an expression longer than a file name is read as an expression.
TEST(CliVariantsCheck, RefusesWhatUsedToPassOrSayTooLittle) {
  TempDir tmp("cli");
  const auto divided = run_cli({"variants", "check", "x + branch(norm(x))/0"}, tmp.path());
  train::testing::expect_cli_error(divided, {"column 20", "scales a tensor by inf, which is not finite"});
  EXPECT_EQ(divided.err.find("gradient check"), std::string::npos) << divided.err;
  EXPECT_EQ(divided.out.find("FAIL"), std::string::npos) << divided.out;

  const std::string only_encoder = (tmp / "only_encoder.json").string();
  train::testing::spit(only_encoder,
                       R"j({"name": "f", "sublayer": "x + a*branch(norm(x))", "let": {"a": {"encoder": "2"}}})j");
  const auto unchecked = run_cli({"variants", "check", only_encoder}, tmp.path());
  train::testing::expect_cli_error(unchecked, {"formula f: no shape could be checked"});
  EXPECT_NE(unchecked.out.find("decoder: not checked"), std::string::npos) << unchecked.out;

  const std::string gate = (tmp / "gate.json").string();
  train::testing::spit(gate, R"j({"name": "f", "sublayer": "x + branch(norm(x))",
                                  "init": [{"roles": ["gate"], "scale": "0.5"}]})j");
  train::testing::expect_cli_error(
      run_cli({"variants", "check", gate}, tmp.path()),
      {"init[0].roles: no parameter of this model has the role gate (its roles:", "drop the rule"});

  std::string long_expression = "x + branch(norm(x))";
  while (long_expression.size() < 300) long_expression += "*1";
  const auto long_one = run_cli({"variants", "check", long_expression}, tmp.path());
  EXPECT_EQ(long_one.exit_code, 0) << long_one.out << long_one.err;
  EXPECT_EQ(long_one.err.find("File name too long"), std::string::npos) << long_one.err;
}

// A run made from a formula records the formula itself, so rerunning needs no file.
TEST(CliVariantsCheck, TrainingFromAFormulaRecordsIt) {
  TempDir tmp("cli");
  const std::string file = (tmp / "mine.json").string();
  train::testing::spit(file, R"j({"name": "mine", "sublayer": "x + branch(norm(x))/sqrt(l)"})j");
  const auto r =
      run_cli({"train", "--run", (tmp / "run").string(), "--set", fmt::format("model.placement=@{}", file), "--set",
               fmt::format("data.dir={}", train::testing::tiny_data_dir().string()), "--set", "train.steps=2", "--set",
               "model.n_layers=2", "--set", "model.d_model=32", "--set", "model.d_ff=64"},
              tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = run_cli({"train", "--dry-run", "--config", (tmp / "run" / "config.json").string()}, tmp.path());
  EXPECT_NE(plan.out.find("model: mine, 2 layers"), std::string::npos) << plan.out << plan.err;
  const auto config = nlohmann::json::parse(train::testing::slurp(tmp / "run" / "config.json"));
  EXPECT_EQ(config["model"]["placement"]["sublayer"], "x + branch(norm(x))/sqrt(l)");
  const auto bad =
      run_cli({"train", "--run", (tmp / "bad").string(), "--set", "model.placement=@nowhere.json"}, tmp.path());
  train::testing::expect_cli_error(bad, {"formula file nowhere.json does not exist"});
}

}  // namespace
}  // namespace normlab::cli
