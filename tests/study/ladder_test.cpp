// Ladders (`normlab study NAME --ladder AXIS=V1,V2,V3`): the trend rule on constructed values (approaching, receding
// and flat on each side), the refusals, each one sentence naming --ladder, and ladders run end to end: a synthetic
// study through run_ladder, and the cheapest real study through the CLI.
#include <gtest/gtest.h>

#include <regex>

#include "browser.h"
#include "study/kit.h"
#include "study/ladder.h"
#include "train/tiny_corpus.h"

namespace normlab::study {
namespace {

namespace fs = std::filesystem;
using train::testing::run_cli;
using train::testing::slurp;
using train::testing::TempDir;
using Side = SubClaim::Side;

const std::vector<double> kRungs = {2, 4, 8};

// Each seed's values at the rungs: seeds 1, 2, 3 with values[seed - 1][rung].
std::vector<SeedValues> per_rung(const std::vector<std::vector<double>>& by_seed) {
  std::vector<SeedValues> out(kRungs.size());
  for (size_t r = 0; r < kRungs.size(); ++r)
    for (size_t s = 0; s < by_seed.size(); ++s) {
      out[r].seeds.push_back(static_cast<int>(s + 1));
      out[r].values.push_back(by_seed[s][r]);
    }
  return out;
}

// Rising by about 1 per doubling on every seed, falling likewise, and rising on one seed while falling on another.
const auto kRising = per_rung({{0.0, 1.0, 2.1}, {0.1, 1.0, 1.9}, {0.0, 1.1, 2.0}});
const auto kFalling = per_rung({{2.0, 1.0, 0.1}, {2.1, 1.1, 0.0}, {1.9, 1.0, 0.0}});
const auto kMixed = per_rung({{0.0, 1.0, 2.0}, {2.0, 1.0, 0.0}, {1.0, 1.1, 0.9}});

Direction direction(const std::vector<SeedValues>& values, Side side, double lo, double hi) {
  return trend_of(kRungs, values, side, lo, hi).direction;
}

TEST(LadderTrend, AboveApproachesWhenTheEffectGrowsRecedesWhenItShrinksFlatWhenSeedsDisagree) {
  EXPECT_EQ(direction(kRising, Side::above, 1.5, 0), Direction::approaching);
  EXPECT_EQ(direction(kFalling, Side::above, 1.5, 0), Direction::receding);
  EXPECT_EQ(direction(kMixed, Side::above, 1.5, 0), Direction::flat);
}

TEST(LadderTrend, BelowApproachesWhenTheEffectShrinks) {
  EXPECT_EQ(direction(kFalling, Side::below, 0, 0.5), Direction::approaching);
  EXPECT_EQ(direction(kRising, Side::below, 0, 0.5), Direction::receding);
  EXPECT_EQ(direction(kMixed, Side::below, 0, 0.5), Direction::flat);
}

// Within a band the slope is of the distance to its centre: closing in on (1.5, 2.5) from below approaches it,
// moving off from its centre recedes, and seeds that disagree are flat.
TEST(LadderTrend, WithinApproachesWhenTheDistanceToTheBandsCentreShrinks) {
  const Trend closing = trend_of(kRungs, kRising, Side::within, 1.5, 2.5);
  EXPECT_EQ(closing.direction, Direction::approaching);
  EXPECT_LT(closing.hi, 0);
  EXPECT_NE(closing.fitted.find("distance"), std::string::npos);
  EXPECT_EQ(direction(kRising, Side::within, -0.5, 0.5), Direction::receding);
  EXPECT_EQ(direction(kMixed, Side::within, 0.5, 1.5), Direction::flat);
}

TEST(LadderTrend, SlopesArePerSeedOverLogRungWithAStudentTInterval) {
  // y = k · log2(rung) for seed slopes k = 2, 3, 4 per doubling: per log(rung), k / ln 2.
  const auto exact = per_rung({{2, 4, 6}, {3, 6, 9}, {4, 8, 12}});
  const Trend t = trend_of(kRungs, exact, Side::above, 0, 0);
  ASSERT_EQ(t.slopes.n(), 3u);
  for (int k = 2; k <= 4; ++k) EXPECT_NEAR(t.slopes.values[k - 2], k / std::log(2.0), 1e-12);
  const double half = student_t_quantile(0.975, 2) * (1 / std::log(2.0)) / std::sqrt(3.0);  // sd of k/ln2 is 1/ln2
  EXPECT_NEAR(t.lo, 3 / std::log(2.0) - half, 1e-9);
  EXPECT_NEAR(t.hi, 3 / std::log(2.0) + half, 1e-9);
  EXPECT_DOUBLE_EQ(t.confidence, 0.95);
  EXPECT_NE(t.text().find("approaching the paper's regime"), std::string::npos) << t.text();
  // Slopes of 1, 2 and 3 per doubling spread too far for 3 seeds: the interval holds 0.
  EXPECT_EQ(direction(per_rung({{1, 2, 3}, {2, 4, 6}, {3, 6, 9}}), Side::above, 0, 0), Direction::flat);
}

// An effect that does not move across the rungs (bert-warmup's C: the same steps to the trained line at every
// budget) has slope 0 on every seed, exactly, and is flat with the interval [0, 0], not rounding noise of 1e-14.
TEST(LadderTrend, AnEffectThatDoesNotMoveHasSlopeZeroExactly) {
  const Trend t =
      trend_of({1000, 3000, 10000}, per_rung({{-10, -10, -10}, {-20, -20, -20}, {0.1, 0.1, 0.1}}), Side::below, 0, 0);
  for (double slope : t.slopes.values) EXPECT_EQ(slope, 0.0);
  EXPECT_EQ(t.lo, 0.0);
  EXPECT_EQ(t.hi, 0.0);
  EXPECT_EQ(t.direction, Direction::flat);
}

TEST(LadderTrend, AMissingValueOrASingleSeedLeavesItUndecided) {
  auto missing = kRising;
  missing[1].values[2] = NAN;
  EXPECT_EQ(direction(missing, Side::above, 0, 0), Direction::undecided);
  const auto one_seed = per_rung({{0.0, 1.0, 2.0}});
  const Trend t = trend_of(kRungs, one_seed, Side::above, 0, 0);
  EXPECT_EQ(t.direction, Direction::undecided);
  EXPECT_NE(t.text().find("undecided"), std::string::npos);
}

// ---- Refusals -------------------------------------------------------------------------------------------------

// A study of tiny runs: seeds × `arms` (each arm's model.n_layers), claim "A": (L − 2)(1 + seed/10) + seed/100 > 0
// and "B": the same < 0, read from each finished run's config, so that A grows with depth and B moves away from its
// side.
std::vector<int> g_arm_layers = {2};
constexpr int kTinySteps = 4;

std::vector<RunRequest> tiny_plan(const StudyOptions& o) {
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (size_t a = 0; a < g_arm_layers.size(); ++a) {
      Json config = train::testing::tiny_config_doc(kTinySteps);
      config["train"]["seed"] = seed;
      config["model"]["n_layers"] = g_arm_layers[a];
      runs.push_back({seed_id(fmt::format("tiny{}", a), seed), config, "train", ""});
    }
  return runs;
}

Report tiny_judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const SeedValues effect = over_seeds(o.seeds, [&](int seed) -> double {
    const RunOutcome* run = find_run(runs, seed_id("tiny0", seed));
    if (!run || run->status != RunStatus::finished) return NAN;
    const double layers = run->config["model"]["n_layers"].get<double>();
    return (layers - 2) * (1 + seed / 10.0) + seed / 100.0;
  });
  Report r;
  r.claims = {claim_above("A", "the effect grows with depth", "(L − 2)(1 + seed/10) + seed/100", effect, 0),
              claim_below("B", "the effect stays negative", "(L − 2)(1 + seed/10) + seed/100", effect, 0)};
  return r;
}

const Study kTiny{.name = "ladder-tiny",
                  .title = "t",
                  .claim = "c",
                  .source = "s",
                  .cost = "",
                  .plan = tiny_plan,
                  .judge = tiny_judge};

StudyOptions tiny_options(const fs::path& dir) {
  StudyOptions o{.dir = dir};
  choose_ladder_seeds(o, "");
  return o;
}

// The error a call fails with ("" if none).
std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One sentence naming the option: it starts with it, says the fix, and starts no second sentence.
void expect_one_sentence(const std::string& message, const std::string& option, const std::string& fix) {
  EXPECT_TRUE(message.starts_with(option)) << message;
  EXPECT_NE(message.find(fix), std::string::npos) << message;
  EXPECT_FALSE(std::regex_search(message, std::regex("[.;:] [A-Z]"))) << message;
}

TEST(LadderPlan, RefusesFewerThanThreeRungsAnotherAxisAndBadValues) {
  g_arm_layers = {2};
  const StudyOptions o = tiny_options("unused");
  const auto refused = [&](const std::string& spec) { return error_of([&] { plan_ladder(kTiny, o, spec); }); };
  expect_one_sentence(refused("model.n_layers=2,4"), "--ladder model.n_layers=2,4", "at least 3 rungs");
  expect_one_sentence(refused("train.lr=1,2,3"), "--ladder train.lr=1,2,3", "choose train.steps, model.n_layers");
  expect_one_sentence(refused("model.n_layers"), "--ladder model.n_layers", "expected AXIS=V1,V2,V3");
  expect_one_sentence(refused("model.n_layers=2,x,4"), "--ladder model.n_layers=2,x,4", "positive whole number");
  expect_one_sentence(refused("model.n_layers=2,0,4"), "--ladder model.n_layers=2,0,4", "positive whole number");
  expect_one_sentence(refused("model.n_layers=2,4,2"), "--ladder model.n_layers=2,4,2", "given twice");
  StudyOptions with_set = o;
  with_set.overrides = {"model.n_layers=3"};
  expect_one_sentence(error_of([&] { plan_ladder(kTiny, with_set, "model.n_layers=2,3,4"); }),
                      "--ladder model.n_layers=2,3,4", "drop that --set");
}

TEST(LadderPlan, RefusesAnAxisTheStudyVaries) {
  StudyOptions o;
  choose_ladder_seeds(o, "");
  // A study-level axis that sets the field.
  Study levels = kTiny;
  levels.axes = {{.key = "levels", .defaults = "2", .quick = "2", .description = "d", .sets = "model.n_layers"}};
  expect_one_sentence(error_of([&] { plan_ladder(levels, o, "model.n_layers=2,3,4"); }),
                      "--ladder model.n_layers=2,3,4", "set by study ladder-tiny's axis levels");
  // A field the arms differ in.
  g_arm_layers = {2, 3};
  expect_one_sentence(error_of([&] { plan_ladder(kTiny, o, "model.n_layers=2,3,4"); }), "--ladder model.n_layers=2,3,4",
                      "sets model.n_layers itself");
  g_arm_layers = {2};
  // Steps in a study that only probes the init.
  expect_one_sentence(error_of([&] { plan_ladder(find_study("stream-at-init"), o, "train.steps=10,20,40"); }),
                      "--ladder train.steps=10,20,40", "trains nothing");
}

// The study's own axis (why-pre-ln's depths 6, 12: A compares them, B and C train at the deeper) is climbed by scaling
// its values so that the largest is the rung, through --grid, never --set; --grid's values scale the same way; a rung
// that would make a depth fractional is refused.
TEST(LadderPlan, AStudysOwnAxisScalesItsValuesSoTheLargestIsTheRung) {
  StudyOptions o;
  choose_ladder_seeds(o, "");
  const Ladder depth = plan_ladder(find_study("why-pre-ln"), o, "model.n_layers=24,6,12");
  ASSERT_EQ(depth.rungs.size(), 3u);
  EXPECT_EQ(depth.rungs[0].grid, "model.n_layers=3,6");
  EXPECT_EQ(depth.rungs[1].grid, "model.n_layers=6,12");
  EXPECT_EQ(depth.rungs[2].grid, "model.n_layers=12,24");
  for (const Rung& r : depth.rungs) EXPECT_TRUE(r.overrides.empty()) << r.value;
  ASSERT_EQ(depth.rules.size(), 1u);
  EXPECT_NE(depth.rules[0].find("scales its values so that the largest is the rung"), std::string::npos);
  expect_one_sentence(error_of([&] { plan_ladder(find_study("why-pre-ln"), o, "model.n_layers=6,9,12"); }),
                      "--ladder model.n_layers=6,9,12", "multiples of 2");
  StudyOptions grid = o;
  grid.grid = {"model.n_layers=2,6"};
  const Ladder from_grid = plan_ladder(find_study("why-pre-ln"), grid, "model.n_layers=6,12,24");
  EXPECT_EQ(from_grid.rungs[0].grid, "model.n_layers=2,6");
  EXPECT_EQ(from_grid.rungs[2].grid, "model.n_layers=8,24");
  expect_one_sentence(error_of([&] { plan_ladder(find_study("why-pre-ln"), grid, "model.n_layers=6,8,12"); }),
                      "--ladder model.n_layers=6,8,12", "multiples of 3");
}

TEST(LadderPlan, RefusesAutoSeedsAndASingleSeed) {
  StudyOptions o;
  expect_one_sentence(error_of([&] { choose_ladder_seeds(o, "auto"); }), "--seeds auto", "--seeds 1,2,3");
  expect_one_sentence(error_of([&] { choose_ladder_seeds(o, "1"); }), "--seeds 1", "at least 2 seeds");
  choose_ladder_seeds(o, "");
  EXPECT_EQ(o.seeds, (std::vector<int>{1, 2, 3}));
  EXPECT_FALSE(o.auto_seeds);
  EXPECT_EQ(o.schedule.looks, 1);
}

// Width: heads and d_ff keep the preset's ratios (the tiny preset: d 32, 2 heads, d_ff 64) and Adam's lr scales as
// 1/width; a width the head size does not divide is refused; a follower the study sets itself is left to it.
TEST(LadderPlan, WidthRungsScaleHeadsFfnAndLearningRate) {
  g_arm_layers = {2};
  const StudyOptions o = tiny_options("ladder");
  const Ladder ladder = plan_ladder(kTiny, o, "model.d_model=128,32,64");
  ASSERT_EQ(ladder.rungs.size(), 3u);
  EXPECT_EQ(ladder.rungs[0].value, 32);
  EXPECT_EQ(ladder.rungs[2].dir, fs::path("ladder") / "rung-model.d_model-128");
  const double lr0 = resolve_config(train::testing::tiny_config_doc(kTinySteps), "t")["train"]["lr"].get<double>();
  const auto& big = ladder.rungs[2].overrides;
  ASSERT_EQ(big.size(), 4u);
  EXPECT_EQ(big[0], "model.d_model=128");
  EXPECT_EQ(big[1], "model.n_heads=8");
  EXPECT_EQ(big[2], "model.d_ff=256");
  EXPECT_EQ(big[3], "train.lr=" + Json(lr0 * 32 / 128).dump());
  EXPECT_EQ(ladder.rules.size(), 3u);
  expect_one_sentence(error_of([&] { plan_ladder(kTiny, o, "model.d_model=32,48,72"); }),
                      "--ladder model.d_model=32,48,72", "multiples of 16");
  // stream-at-init's d_ff_multiple axis sets model.d_ff: the ladder leaves d_ff to the study.
  StudyOptions quick = o;
  quick.quick = true;
  const Ladder stream = plan_ladder(find_study("stream-at-init"), quick, "model.d_model=64,128,256");
  for (const Rung& r : stream.rungs)
    for (const std::string& s : r.overrides) EXPECT_FALSE(s.starts_with("model.d_ff=")) << s;
  EXPECT_NE(fmt::format("{}", fmt::join(stream.rules, "; ")).find("model.d_ff: set by study stream-at-init"),
            std::string::npos);
}

// ---- End to end -------------------------------------------------------------------------------------------------

RunnerOptions runner() { return {.jobs = 2, .threads = 2, .quiet = true, .binary = NORMLAB_BINARY}; }

// A depth ladder of the synthetic study: A fails at 1 layer, is unclear at 2 and holds from 3 (approaching); B holds at
// 1 and recedes. Each rung is a study folder with its own report, and the ladder's report has the trends.
TEST(LadderRun, WritesEachRungAsAStudyAndTheTrendsInLadderJson) {
  g_arm_layers = {2};
  TempDir tmp("ladder");
  StudyOptions o = tiny_options(tmp / "ladder");
  const Ladder ladder = plan_ladder(kTiny, o, "model.n_layers=1,2,3");
  const LadderResult result = run_ladder(kTiny, o, ladder, runner());
  ASSERT_EQ(result.rungs.size(), 3u);
  for (const char* rung : {"rung-model.n_layers-1", "rung-model.n_layers-2", "rung-model.n_layers-3"}) {
    EXPECT_TRUE(fs::exists(tmp / "ladder" / rung / "report.json")) << rung;
    EXPECT_TRUE(fs::exists(tmp / "ladder" / rung / "runs" / "tiny0-s3" / "status.json")) << rung;
  }
  EXPECT_EQ(result.rungs[0].verdict, "partly reproduced");
  EXPECT_EQ(result.html, tmp / "ladder" / "ladder.html");
  EXPECT_TRUE(fs::exists(tmp / "ladder" / "ladder.md"));
  const Json json = Json::parse(slurp(tmp / "ladder" / "ladder.json"));
  EXPECT_EQ(json["axis"], "model.n_layers");
  ASSERT_EQ(json["sub_claims"].size(), 2u);
  const Json& a = json["sub_claims"][0];
  EXPECT_EQ(a["id"], "A");
  EXPECT_EQ(a["first_holding_rung"], 3);
  EXPECT_EQ(a["trend"]["direction"], "approaching the paper's regime");
  EXPECT_GT(a["trend"]["interval"][0].get<double>(), 0);
  EXPECT_EQ(a["per_rung"].size(), 3u);
  EXPECT_EQ(a["per_rung"][1]["outcome"], "unclear");
  const Json& b = json["sub_claims"][1];
  EXPECT_EQ(b["first_holding_rung"], 1);
  EXPECT_EQ(b["trend"]["direction"], "receding");
  const std::string md = slurp(tmp / "ladder" / "ladder.md");
  EXPECT_NE(md.find("holds first at model.n_layers=3"), std::string::npos) << md;
  EXPECT_NE(md.find("rung-model.n_layers-2/report.html"), std::string::npos) << md;
  // Its footer counts rungs, not run folders: a ladder has no runs/ of its own.
  EXPECT_NE(md.find("Rungs: 3 studies, each with its own report and runs (rung-model.n_layers-V/report.html)."),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("directories under runs/"), std::string::npos) << md;
  EXPECT_NE(slurp(tmp / "ladder" / "ladder.html").find("<h2>Rungs</h2>"), std::string::npos);
  EXPECT_NE(slurp(tmp / "ladder" / "rung-model.n_layers-1" / "report.md").find("Runs: 3 directories under runs/."),
            std::string::npos);
}

// A study with its own depth axis (one arm per depth), judged on its deepest arm's depth: A "the deepest arm is over 2
// layers", a statement naming that depth. Climbed over model.n_layers, each rung's arms are the axis's values scaled to
// the rung, and the ladder names the sub-claim as its top rung does.
std::vector<RunRequest> depth_axis_plan(const StudyOptions& o) {
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (int layers : o.int_axis("model.n_layers")) {
      Json config = train::testing::tiny_config_doc(kTinySteps);
      config["train"]["seed"] = seed;
      config["model"]["n_layers"] = layers;
      runs.push_back({seed_id(fmt::format("tinyL{}", layers), seed), config, "train", ""});
    }
  return runs;
}

Report depth_axis_judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const std::vector<int> depths = o.int_axis("model.n_layers");
  const int deepest = *std::max_element(depths.begin(), depths.end());
  const SeedValues effect = over_seeds(o.seeds, [&](int seed) -> double {
    const RunOutcome* run = find_run(runs, seed_id(fmt::format("tinyL{}", deepest), seed));
    if (!run || run->status != RunStatus::finished) return NAN;
    return run->config["model"]["n_layers"].get<double>() - 2 + seed / 100.0;
  });
  Report r;
  r.claims = {claim_above("A", fmt::format("the deepest arm, {} layers, is over 2 layers", deepest), "L − 2 + seed/100",
                          effect, 0)};
  return r;
}

TEST(LadderRun, AStudysOwnAxisRunsScaledAtEachRung) {
  TempDir tmp("ladder");
  const Study depth_axis{
      .name = "ladder-depth-axis",
      .title = "t",
      .claim = "c",
      .source = "s",
      .cost = "",
      .axes = {{.key = "model.n_layers", .defaults = "1,2", .quick = "1,2", .description = "the arms' depths"}},
      .plan = depth_axis_plan,
      .judge = depth_axis_judge};
  StudyOptions o = tiny_options(tmp / "ladder");
  const Ladder ladder = plan_ladder(depth_axis, o, "model.n_layers=2,4,8");
  const LadderResult result = run_ladder(depth_axis, o, ladder, runner());
  ASSERT_EQ(result.rungs.size(), 3u);
  const std::vector<std::vector<int>> arms = {{1, 2}, {2, 4}, {4, 8}};
  for (size_t i = 0; i < arms.size(); ++i)
    for (int layers : arms[i]) {
      const fs::path run = ladder.rungs[i].dir / "runs" / fmt::format("tinyL{}-s2", layers);
      ASSERT_TRUE(fs::exists(run / "status.json")) << run;
      EXPECT_EQ(Json::parse(slurp(run / "config.json"))["model"]["n_layers"], layers) << run;
    }
  const Json json = Json::parse(slurp(tmp / "ladder" / "ladder.json"));
  EXPECT_EQ(json["rungs"][2]["grid"], "model.n_layers=4,8");
  EXPECT_EQ(json["sub_claims"][0]["first_holding_rung"], 4);
  EXPECT_EQ(json["sub_claims"][0]["trend"]["direction"], "approaching the paper's regime");
  EXPECT_EQ(json["sub_claims"][0]["statement"],
            "the deepest arm, 8 layers, is over 2 layers (as at the top rung; each rung's report states its own)");
  EXPECT_NE(slurp(tmp / "ladder" / "ladder.md").find("Axis rule: model.n_layers is an axis of study ladder-depth-axis"),
            std::string::npos);
}

// A study stated as data with two arms that differ only in their learning rate: A reads arm "fast", B arm "slow".
std::vector<RunRequest> two_arm_plan(const StudyOptions& o) {
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (const auto& [arm, lr] : {std::pair{"fast", 1e-3}, std::pair{"slow", 1e-4}}) {
      Json config = train::testing::tiny_config_doc(kTinySteps);
      config["train"]["seed"] = seed;
      config["train"]["lr"] = lr;
      runs.push_back({seed_id(arm, seed), config, "train", ""});
    }
  return runs;
}

const Study kTwoArms{.name = "ladder-two-arms",
                     .title = "t",
                     .claim = "c",
                     .source = "s",
                     .cost = "",
                     .plan = two_arm_plan,
                     .arms = {{"fast", "lr 1e-3"}, {"slow", "lr 1e-4"}},
                     .sub_claims = {{.id = "A", .statement = "a", .of = {"fast", "final_train_loss"}, .threshold = 0},
                                    {.id = "B", .statement = "b", .of = {"slow", "final_train_loss"}, .threshold = 0}},
                     .judge = [](const StudyOptions&, const std::vector<RunOutcome>&) { return Report{}; }};

// --claims A: each rung runs arm "fast" alone, the ladder follows A alone, and each rung's report says B was not
// followed; an id the study lacks is refused naming its sub-claims, and --claims without --ladder is refused.
TEST(LadderRun, ClaimsRunOnlyTheArmsTheFollowedSubClaimsRead) {
  TempDir tmp("ladder");
  StudyOptions o = tiny_options(tmp / "ladder");
  o.claims = {"A"};
  const Ladder ladder = plan_ladder(kTwoArms, o, "train.steps=2,3,4");
  const LadderResult result = run_ladder(kTwoArms, o, ladder, runner());
  for (const Rung& rung : ladder.rungs) {
    EXPECT_TRUE(fs::exists(rung.dir / "runs" / "fast-s1" / "status.json")) << rung.dir;
    EXPECT_FALSE(fs::exists(rung.dir / "runs" / "slow-s1")) << rung.dir;
  }
  ASSERT_EQ(result.rungs.size(), 3u);
  ASSERT_EQ(result.rungs[0].claims.size(), 2u);
  EXPECT_EQ(result.rungs[0].claims[1].cannot_decide, "not followed here (--claims A): its arms were not run");
  const Json json = Json::parse(slurp(tmp / "ladder" / "ladder.json"));
  ASSERT_EQ(json["sub_claims"].size(), 1u);
  EXPECT_EQ(json["sub_claims"][0]["id"], "A");
  EXPECT_EQ(json["followed"], Json::array({"A"}));
  EXPECT_NE(slurp(tmp / "ladder" / "ladder.md").find("It follows only sub-claim A (--claims)"), std::string::npos);

  // What --preregistration --ladder prints for a rung is the hash its report states, --claims included.
  const std::string frozen = ladder_preregistration_text(kTwoArms, o, ladder);
  for (const Rung& rung : ladder.rungs) {
    const std::string hash = Json::parse(slurp(rung.dir / "report.json"))["preregistration"];
    const size_t at = frozen.find(fmt::format("## rung train.steps={} (train.steps={})", rung.value, rung.value));
    ASSERT_NE(at, std::string::npos) << frozen;
    EXPECT_EQ(frozen.substr(frozen.find("hash: ", at) + 6, hash.size()), hash) << rung.value;
  }
  StudyOptions every_claim = o;
  every_claim.claims.clear();
  EXPECT_EQ(ladder_preregistration_text(kTwoArms, every_claim, ladder)
                .find(Json::parse(slurp(ladder.rungs[0].dir / "report.json"))["preregistration"].get<std::string>()),
            std::string::npos);

  o.claims = {"A", "Z"};
  expect_one_sentence(error_of([&] { plan_ladder(kTwoArms, o, "train.steps=2,3,4"); }), "--claims A,Z",
                      "its sub-claims are A, B");
  const auto cli =
      run_cli({"study", "stream-at-init", "--quick", "--claims", "A", "--out", (tmp / "s").string()}, tmp.path());
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_NE(cli.err.find("--claims A: a study at its preset judges every sub-claim"), std::string::npos) << cli.err;
}

// The cheapest real study (stream-at-init, init only) as a ladder through the CLI on the tiny corpus: every rung's
// report, and ladder.json with a slope interval and a first holding rung per sub-claim; ladder.html draws its charts.
TEST(LadderRun, CliLaddersARealStudyAndTheReportRenders) {
  TempDir tmp("ladder");
  const fs::path dir = tmp / "stream";
  const auto r = run_cli({"study", "stream-at-init", "--quick", "--ladder", "model.n_layers=2,3,4", "--out",
                          dir.string(), "--set", "data.dir=" + train::testing::tiny_data_dir().string(), "--jobs", "2"},
                         tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ladder: " + (dir / "ladder.html").string()), std::string::npos) << r.out;
  for (int layers : {2, 3, 4})
    EXPECT_TRUE(fs::exists(dir / fmt::format("rung-model.n_layers-{}", layers) / "report.html")) << layers;
  const Json json = Json::parse(slurp(dir / "ladder.json"));
  ASSERT_FALSE(json["sub_claims"].empty());
  for (const Json& c : json["sub_claims"]) {
    EXPECT_TRUE(c["trend"]["interval"][0].is_number()) << c.dump();
    EXPECT_TRUE(c["trend"]["interval"][1].is_number()) << c.dump();
    EXPECT_TRUE(c.contains("first_holding_rung")) << c.dump();
  }
  EXPECT_TRUE(std::any_of(json["sub_claims"].begin(), json["sub_claims"].end(), [](const Json& c) {
    return c["first_holding_rung"].is_number();
  })) << json.dump();
  const std::string body =
      normlab::testing::render_in_chromium("file://" + (dir / "ladder.html").string(), "ladder-stream-at-init");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(body, m, std::regex(R"re(data-charts="(\d+)" data-charts-drawn="(\d+)")re"))) << body;
  EXPECT_GT(std::stoi(m[1]), 0);
  EXPECT_EQ(m[1], m[2]);
}

}  // namespace
}  // namespace normlab::study
