// The statistics table (study/statistics.h): each entry reads its number from a run's files written with chosen
// values, gives NaN where the run lacks it, and checks its arguments with one sentence naming the field.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "study/kit.h"
#include "study/statistics.h"
#include "study/synthetic_runs.h"

namespace normlab::study {
namespace {

using namespace testing;
using train::testing::TempDir;

// One finished training run of `layers` layers under `tmp`, with no files yet.
RunOutcome a_run(const TempDir& tmp, const std::string& id, int layers = 4) {
  Json config = small_lm("pre", layers, 80, 1);
  config["data"]["dir"] = train::testing::tiny_data_dir().string();
  RunOutcome o{{id, config}, tmp / id, RunStatus::finished, "", 1.0, resolve_config(config, id)};
  fs::create_directories(o.dir / "run");
  return o;
}

double measure(std::string_view name, const RunOutcome* run, const Json& args = Json::object()) {
  const Statistic& s = find_statistic(name, "test");
  return s.of_run(run, check_arguments(s, args, "test"));
}

TEST(Statistics, FinalLossesCountADivergedRunAsTheUnigramEntropy) {
  TempDir tmp("stat");
  RunOutcome trained = a_run(tmp, "trained"), diverged = a_run(tmp, "diverged");
  write_trained(trained, 4.0, 4.2);
  write_diverged(diverged);
  EXPECT_NEAR(measure("final_train_loss", &trained), 4.0, 1e-12);
  EXPECT_NEAR(measure("final_val_loss", &trained), 4.2, 1e-12);
  EXPECT_NEAR(measure("final_train_loss", &diverged), 6.0, 1e-12) << "the unigram entropy of its non_finite record";
  EXPECT_NEAR(measure("final_val_loss", &diverged), 6.0, 1e-12);
  EXPECT_TRUE(std::isnan(measure("final_train_loss", nullptr))) << "a missing run has no number";
}

TEST(Statistics, LossAboveTheTrainedLineAndStalledFollowTheStallRule) {
  TempDir tmp("stat");
  RunOutcome trained = a_run(tmp, "trained"), stalled = a_run(tmp, "stalled"), diverged = a_run(tmp, "diverged");
  write_trained(trained, 4.0);
  write_stalled(stalled);
  write_diverged(diverged);
  EXPECT_NEAR(measure("loss_above_trained_line", &trained), 4.0 - (6.0 - train::kStallMargin), 1e-12);
  EXPECT_NEAR(measure("loss_above_trained_line", &stalled), 6.2 - (6.0 - train::kStallMargin), 1e-12);
  EXPECT_NEAR(measure("loss_above_trained_line", &diverged), train::kStallMargin, 1e-12);
  EXPECT_EQ(measure("stalled_or_diverged", &trained), 0);
  EXPECT_EQ(measure("stalled_or_diverged", &stalled), 1);
  EXPECT_EQ(measure("stalled_or_diverged", &diverged), 1) << "a diverged run did not learn either";
  EXPECT_TRUE(std::isnan(measure("stalled_or_diverged", nullptr)));
}

// Logs every 10 steps (80 steps, 8 logs): the running mean of 3 first falls below the line (6 − 0.25) at the log
// whose window is all below it or low enough on average.
TEST(Statistics, StepsToTheTrainedLineIsTheFirstLogWhoseMeanOfThreeIsBelowIt) {
  TempDir tmp("stat");
  RunOutcome fast = a_run(tmp, "fast"), late = a_run(tmp, "late"), stalled = a_run(tmp, "stalled"),
             diverged = a_run(tmp, "diverged");
  write_training(fast, {7.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0}, 5.0);  // (7 + 5 + 5) / 3 = 5.67 < 5.75 at step 30
  write_training(late, {7.0, 6.5, 6.0, 6.0, 5.5, 5.5, 5.5, 5.5}, 5.5);  // (6 + 5.5 + 5.5) / 3 = 5.67 at step 60
  write_stalled(stalled);
  write_diverged(diverged);
  EXPECT_EQ(measure("steps_to_trained_line", &fast), 30);
  EXPECT_EQ(measure("steps_to_trained_line", &late), 60);
  EXPECT_EQ(measure("steps_to_trained_line", &stalled), 81) << "never: the budget + 1";
  EXPECT_EQ(measure("steps_to_trained_line", &diverged), 81);
  EXPECT_TRUE(std::isnan(measure("steps_to_trained_line", nullptr)));
}

TEST(Statistics, TokensPerSecondIsTheTrainingTokensOverItsWallTime) {
  TempDir tmp("stat");
  RunOutcome fast = a_run(tmp, "fast"), slow = a_run(tmp, "slow");
  write_trained(fast, 4.0, NAN, 8);
  write_trained(slow, 4.0, NAN, 32);
  const Json& train = fast.config["train"];
  const double tokens =
      train["steps"].get<double>() * train["batch_size"].get<double>() * train["seq_len"].get<double>();
  EXPECT_NEAR(measure("tokens_per_second", &fast), tokens / 8, 1e-9);
  EXPECT_NEAR(measure("tokens_per_second", &fast) / measure("tokens_per_second", &slow), 4, 1e-12);
  EXPECT_TRUE(std::isnan(measure("tokens_per_second", nullptr)));
}

TEST(Statistics, AnalysisReadsOneLayersTensorCountingFromTheTop) {
  TempDir tmp("stat");
  RunOutcome run = a_run(tmp, "init", 3);
  Json result{{"name", Json::array()}, {"grad_norm", Json::array()}};
  for (int l = 0; l < 3; ++l) {
    result["name"].push_back(fmt::format("layers.{}.attn.qkv.weight", l)), result["grad_norm"].push_back(99.0);
    result["name"].push_back(fmt::format("layers.{}.ffn.fc2.weight", l)), result["grad_norm"].push_back(1.0 + l);
  }
  write_analysis(run, "grad-init", result);
  const Json fc2{{"analysis", "grad-init"}, {"tensor", "ffn.fc2.weight"}};
  EXPECT_EQ(measure("analysis", &run, fc2), 3.0) << "layer -1 (the default) is the last";
  EXPECT_EQ(measure("analysis", &run, Json{{"analysis", "grad-init"}, {"tensor", "ffn.fc2.weight"}, {"layer", 0}}),
            1.0);
  EXPECT_TRUE(std::isnan(measure("analysis", &run, Json{{"analysis", "grad-init"}, {"tensor", "ffn.fc9.weight"}})));
  EXPECT_TRUE(std::isnan(measure("analysis", &run, Json{{"analysis", "stream-init"}, {"tensor", "ffn.fc2.weight"}})));
}

TEST(Statistics, ProbeReadsAnEntryTheLargestOrAHalfOfTheFirstOrLastRecord) {
  TempDir tmp("stat");
  RunOutcome run = a_run(tmp, "probed");
  write_probe(run, 1, "stream", per_layer("max_abs", {1, 1, 2, 2, 3}));
  write_probe(run, 50, "stream", per_layer("max_abs", {1, 2, 4, 8, 16}));
  const auto probe = [&](Json args) {
    args["family"] = "stream", args["field"] = "max_abs";
    return measure("probe", &run, args);
  };
  EXPECT_EQ(probe(Json::object()), 16) << "the last entry of the last record";
  EXPECT_EQ(probe({{"entry", 1}}), 2);
  EXPECT_EQ(probe({{"step", "first"}, {"over", "max"}}), 3);
  EXPECT_EQ(probe({{"over", "mean_first_half"}}), 3) << "layers 1..2 of 4: (2 + 4) / 2";
  EXPECT_EQ(probe({{"over", "mean_second_half"}}), 12) << "layers 3..4: (8 + 16) / 2";
  EXPECT_EQ(probe({{"over", "max"}, {"relative_to", "first_probe"}}), 16.0 / 3) << "the change over training";
  EXPECT_TRUE(std::isnan(probe({{"entry", 9}})));
  EXPECT_TRUE(std::isnan(measure("probe", &run, Json{{"family", "branch"}, {"field", "rms"}})));
}

// model-update's numbers: a scalar column (the model update after step 1 against its largest in the first quarter of
// the 80 steps, which differ when the update keeps growing), and the mean over the tensors of one kind of norm.
TEST(Statistics, ProbeReadsAScalarTheLargestEarlyAndTheMeanOverNamedTensors) {
  TempDir tmp("stat");
  RunOutcome run = a_run(tmp, "probed");
  for (const auto& [step, change] : std::vector<std::pair<int, double>>{{1, 0.5}, {10, 2.0}, {20, 3.0}, {40, 9.0}})
    write_probe(run, step, "model_update", {{"logit_change_rms", change}});
  write_probe(run, 1, "norm",
              {{"name", {"layers.0.attn.post_norm", "layers.0.attn.pre_norm", "layers.0.ffn.post_norm"}},
               {"input_rms", {1.0, 100.0, 3.0}}});
  write_probe(run, 40, "norm",
              {{"name", {"layers.0.attn.post_norm", "layers.0.attn.pre_norm", "layers.0.ffn.post_norm"}},
               {"input_rms", {4.0, 100.0, 6.0}}});
  // The arguments with one more set.
  const auto with = [](Json args, const std::string& key, const std::string& value) {
    args[key] = value;
    return args;
  };
  const Json update = {{"family", "model_update"}, {"field", "logit_change_rms"}};
  EXPECT_EQ(measure("probe", &run, with(update, "step", "first")), 0.5) << "after step 1";
  EXPECT_EQ(measure("probe", &run, with(update, "step", "largest_in_first_quarter")), 3.0)
      << "steps 1, 10 and 20 are within 80 / 4; step 40 is not";
  const Json inputs = {{"family", "norm"}, {"field", "input_rms"}, {"names", "post_norm"}, {"over", "mean"}};
  EXPECT_EQ(measure("probe", &run, with(inputs, "step", "first")), 2.0) << "(1 + 3) / 2, no pre_norm";
  EXPECT_EQ(measure("probe", &run, with(inputs, "relative_to", "first_probe")), 2.5) << "5 ÷ 2";
  EXPECT_TRUE(std::isnan(measure("probe", &run, with(inputs, "names", "nothing"))));
}

// grad-balance's number: fc2's gradient in the first layer ÷ the last (of 4), each averaged over the probes up to step
// 20 of 80; the attention weights beside it and the probe at step 40 do not count.
TEST(Statistics, FirstOverLastLayerAveragesTheEarlyProbesOfOneTensor) {
  TempDir tmp("stat");
  RunOutcome run = a_run(tmp, "probed");
  const Json names = {"layers.0.ffn.fc2.weight", "layers.0.attn.q.weight", "layers.3.ffn.fc2.weight"};
  write_probe(run, 1, "param", {{"name", names}, {"grad_norm", {6.0, 100.0, 1.0}}});
  write_probe(run, 20, "param", {{"name", names}, {"grad_norm", {2.0, 100.0, 1.0}}});
  write_probe(run, 40, "param", {{"name", names}, {"grad_norm", {50.0, 100.0, 1.0}}});
  const Json fc2 = {{"tensor", "ffn.fc2.weight"}};
  EXPECT_NEAR(measure("first_over_last_layer", &run, fc2), 4.0, 1e-12) << "(6 + 2) / 2 ÷ 1";
  EXPECT_NEAR(measure("first_over_last_layer", &run, {{"tensor", "ffn.fc2.weight"}, {"form", "abs_log"}}),
              std::log(4.0), 1e-12);
  EXPECT_EQ(early_layer_means(&run, "ffn.fc2.weight", "grad_norm").size(), 4u);
  EXPECT_TRUE(std::isnan(early_layer_means(&run, "ffn.fc2.weight", "grad_norm")[1])) << "layer 1 was not probed";
  EXPECT_TRUE(std::isnan(measure("first_over_last_layer", &run, {{"tensor", "ffn.fc1.weight"}})));
  EXPECT_TRUE(std::isnan(measure("first_over_last_layer", nullptr, fc2)));
}

// layer-importance's numbers: a per-layer analysis column over the halves of a 4-layer stack.
TEST(Statistics, AnalysisHalvesAveragesEachHalfAndGivesTheSecondHalfsShare) {
  TempDir tmp("stat");
  RunOutcome run = a_run(tmp, "analysed");
  write_analysis(run, "layer-drop", {{"delta_loss", {3.0, 1.0, 0.5, 0.5}}});
  const auto part = [&](const char* which) {
    return measure("analysis_halves", &run, {{"analysis", "layer-drop"}, {"column", "delta_loss"}, {"part", which}});
  };
  EXPECT_EQ(part("first_half"), 2.0);
  EXPECT_EQ(part("second_half"), 0.5);
  EXPECT_EQ(part("second_half_share"), 0.2) << "0.5 / (2 + 0.5)";
  write_analysis(run, "angular", {{"angular_distance", {0.1, 0.2, 0.3}}});
  EXPECT_TRUE(std::isnan(measure("analysis_halves", &run,
                                 {{"analysis", "angular"}, {"column", "angular_distance"}, {"part", "second_half"}})))
      << "a column shorter than the stack";
}

// stream-at-init's numbers: a per-layer-input column (L + 1 entries) of a 4-layer stack against Xiong's band
// [1 + l/2, 1 + 3l/2], and its growth per layer.
TEST(Statistics, AProfileOverTheLayersGivesItsSlopeAndItsLeastMarginInsideABand) {
  TempDir tmp("stat");
  RunOutcome inside = a_run(tmp, "inside"), outside = a_run(tmp, "outside"), short_column = a_run(tmp, "short");
  const Json column = {{"analysis", "stream-init"}, {"column", "mean_square"}};
  Json band = column;
  band.update({{"from", 1}, {"low_per_layer", 0.5}, {"high_per_layer", 1.5}});
  write_analysis(inside, "stream-init", {{"mean_square", {1.0, 2.0, 2.5, 3.5, 4.0}}});
  EXPECT_NEAR(measure("profile_slope", &inside, column), 0.75, 1e-12) << "cov 7.5 / var 10 over l = 0..4";
  EXPECT_NEAR(measure("band_margin", &inside, band), 0.25, 1e-12)
      << "margins 0.5/1, 0.5/2, 1/3, 1/4 at l = 1..4: the least is 0.25";
  write_analysis(outside, "stream-init", {{"mean_square", {1.0, 2.0, 1.5, 3.5, 4.0}}});
  EXPECT_NEAR(measure("band_margin", &outside, band), -0.25, 1e-12) << "l = 2 lies 0.5 below a band 2 wide";
  write_analysis(short_column, "stream-init", {{"mean_square", {1.0, 2.0, 2.5, 3.5}}});
  EXPECT_TRUE(std::isnan(measure("band_margin", &short_column, band))) << "a column without the stack's output";
  EXPECT_TRUE(std::isnan(measure("profile_slope", &short_column, column)));
  EXPECT_TRUE(std::isnan(measure("profile_slope", nullptr, column)));
  band["from"] = "1";
  try {
    measure("band_margin", &inside, band);
    FAIL() << "a text for a number was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.from: expected a number"), std::string::npos) << e.what();
  }
}

TEST(Statistics, ArgumentsAreCheckedWithOneSentenceNamingTheField) {
  const Statistic& probe = find_statistic("probe", "here");
  const auto message = [&](const Json& args) {
    try {
      check_arguments(probe, args, "here");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(Json{{"field", "x"}}).find("here.family: missing"), std::string::npos);
  EXPECT_NE(message(Json{{"family", "stream"}, {"field", 3}}).find("here.field: expected a text"), std::string::npos);
  EXPECT_NE(message(Json{{"family", "stream"}, {"field", "x"}, {"entry", "last"}}).find("here.entry: expected a whole"),
            std::string::npos);
  EXPECT_NE(message(Json{{"family", "stream"}, {"field", "x"}, {"step", "middle"}}).find("not one of first, last"),
            std::string::npos);
  EXPECT_NE(message(Json{{"family", "stream"}, {"field", "x"}, {"layr", 1}}).find("here.layr: statistic probe has no"),
            std::string::npos);
  EXPECT_EQ(message(Json{{"family", "stream"}, {"field", "x"}}), "accepted");
  try {
    find_statistic("nope", "sub_claims[0].of.statistic");
    FAIL() << "an unknown statistic was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sub_claims[0].of.statistic: \"nope\" is not a statistic (known: "),
              std::string::npos)
        << e.what();
  }
}

// The table is the one list: `normlab study statistics` shows every entry with each parameter.
TEST(Statistics, TheHelpListsEveryEntryAndParameter) {
  const std::string help = statistics_help();
  for (const Statistic& s : all_statistics()) {
    EXPECT_NE(help.find(fmt::format("  {} (", s.name)), std::string::npos) << s.name;
    for (const StatParam& p : s.params) EXPECT_NE(help.find(fmt::format("      {}: ", p.name)), std::string::npos);
  }
}

}  // namespace
}  // namespace normlab::study
