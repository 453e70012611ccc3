// Studies: the runner skips finished runs and resumes after a kill, the flagship's quick preset judges
// real runs, and every report renders in a real browser (headless Debian chromium) with each chart drawn.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "browser.h"
#include "study/kit.h"
#include "study/report.h"
#include "study/studies.h"
#include "train/checkpoint.h"
#include "train/records.h"
#include "train/tiny_corpus.h"

namespace normlab::study {
namespace {

using train::testing::run_cli;
using train::testing::slurp;
using train::testing::spit;
using train::testing::TempDir;
using train::testing::tiny_config_doc;
using train::testing::tiny_data_dir;
using train::testing::tiny_pairs_dir;
namespace fs = std::filesystem;

// Loads a report in headless chromium (browser.h); returns the <body ...> tag of the rendered DOM and
// saves a screenshot as a test artifact under build/test-artifacts/.
std::string render_in_chromium(const fs::path& html, const std::string& screenshot_name) {
  return normlab::testing::render_in_chromium("file://" + fs::absolute(html).string(), screenshot_name);
}

void expect_rendered(const std::string& body) {
  std::smatch m;
  ASSERT_TRUE(std::regex_search(body, m,
                                std::regex(R"re(data-charts="(\d+)" data-charts-drawn="(\d+)" data-errors="(\d+)")re")))
      << "the report's self-check did not run: " << body;
  EXPECT_GT(std::stoi(m[1]), 0);
  EXPECT_EQ(m[1], m[2]) << "some chart canvas stayed blank";
  EXPECT_EQ(m[3], "0") << "the page raised console errors";
}

TEST(StudyReport, EveryChartIsDrawnInChromiumWithoutErrors) {
  TempDir tmp("study");
  Report r{.name = "t",
           .title = "A test report",
           .claim = "c",
           .source = "s",
           .setup = "x",
           .verdict = "reproduced",
           .verdict_rule = "rule",
           .evidence = {"e"}};
  r.charts.push_back({"loss", "step", "loss", {{"a", {1, 2, 3}, {3, 2, 1}}, {"b", {1, 2, 3}, {2, 2, 2}}}});
  r.charts.push_back({"log", "layer", "E[x²]", {{"a", {0, 1, 2}, {1, 10, 100}}}, true});
  r.tables.push_back({"runs", {"run", "loss"}, {{"a", "1.0"}, {"b", "2.0"}}, {"trained", "diverged"}});
  r.tables.push_back({"grid", {"cell", "max|x|"}, {{"post", "stalled 5.912"}}});
  expect_rendered(render_in_chromium(write_report(tmp.path(), r), "synthetic-report"));
  // A grid cell that starts with an outcome is coloured by it.
  EXPECT_NE(slurp(tmp / "report.html").find("<td class=\"stalled\">stalled 5.912</td>"), std::string::npos);
  // The Markdown summary carries the verdict and the table.
  const std::string md = slurp(tmp / "report.md");
  EXPECT_NE(md.find("Verdict: reproduced"), std::string::npos);
  EXPECT_NE(md.find("| b | 2.0 |"), std::string::npos);
  EXPECT_NE(md.find("| cell | max\\|x\\| |"), std::string::npos) << "a '|' inside a cell is escaped";
}

// Runs `normlab args...` with `cwd` as the working directory: the default output folders (runs/...)
// are relative to it.
train::testing::CliResult run_cli_in(const fs::path& cwd, const std::vector<std::string>& args) {
  struct Cwd {
    fs::path before = fs::current_path();
    ~Cwd() { fs::current_path(before); }
  } restore;
  fs::current_path(cwd);
  return run_cli(args, cwd);
}

Report verdict_report(const std::string& name, const std::string& verdict) {
  return Report{.name = name, .title = "The " + name + " study", .verdict = verdict, .verdict_rule = "rule"};
}

// `normlab study list` shows each study's last verdict in its default folders; studies.html beside the
// study folders links every report with its verdict.
TEST(StudyCli, ListShowsTheLastVerdictsAndTheIndexLinksEveryReport) {
  TempDir tmp("study");
  write_report(tmp / "runs" / "study-why-pre-ln", verdict_report("why-pre-ln", "reproduced"));
  write_report(tmp / "runs" / "study-why-pre-ln-quick", verdict_report("why-pre-ln", "inconclusive"));
  Report sweep = verdict_report("sweep", "");
  write_report(tmp / "runs" / "sweep-grid", sweep);
  EXPECT_EQ(slurp(tmp / "runs" / "sweep-grid" / "report.md").find("Verdict"), std::string::npos)
      << "a sweep has no verdict";
  const fs::path index = write_report_index(tmp / "runs" / "study-why-pre-ln-quick");
  EXPECT_EQ(index, tmp / "runs" / "studies.html");
  const std::string html = slurp(index);
  for (const char* row : {"<a href=\"study-why-pre-ln/report.html\">study-why-pre-ln</a></td><td class=\"reproduced\">",
                          "<a href=\"study-why-pre-ln-quick/report.html\">study-why-pre-ln-quick</a></td><td "
                          "class=\"inconclusive\">inconclusive",
                          "<a href=\"sweep-grid/report.html\">sweep-grid</a></td><td class=\"\">(a sweep: no verdict)"})
    EXPECT_NE(html.find(row), std::string::npos) << row << "\n" << html;

  const auto r = run_cli_in(tmp.path(), {"study", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto written =
      Json::parse(slurp(tmp / "runs" / "study-why-pre-ln" / "report.json"))["written"].get<std::string>();
  EXPECT_TRUE(std::regex_match(written, std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d UTC)"))) << written;
  EXPECT_NE(r.out.find(fmt::format("    last:   reproduced, {} (runs/study-why-pre-ln/report.html); --quick: "
                                   "inconclusive, ",
                                   written)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    last:   none yet in runs/study-grad-by-depth\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Every report with its verdict: runs/studies.html"), std::string::npos) << r.out;
}

// Every training run of a study checkpoints (a quarter of the run, at most every 100 steps), after the
// overrides: --set train.steps moves the checkpoints, --set train.checkpoint_every wins.
TEST(StudyPlan, TrainingRunsCheckpoint) {
  const auto intervals = [](std::vector<std::string> overrides) {
    StudyOptions o{.quick = true, .overrides = std::move(overrides)};
    std::set<int> out;
    for (const RunRequest& r : plan_study(find_study("why-pre-ln"), o))
      if (r.kind == "train") out.insert(resolve_config(r.config, r.id)["train"]["checkpoint_every"].get<int>());
    return out;
  };
  EXPECT_EQ(intervals({}), std::set<int>{15}) << "why-pre-ln --quick trains 60 steps";
  EXPECT_EQ(checkpoint_interval(500), 100);
  EXPECT_EQ(checkpoint_interval(2), 1);
  EXPECT_EQ(intervals({"train.steps=800"}), std::set<int>{100});
  EXPECT_EQ(intervals({"train.steps=40"}), std::set<int>{10});
  EXPECT_EQ(intervals({"train.checkpoint_every=7"}), std::set<int>{7});
}

// The runs a study plans with the given --set overrides and --grid axes, by id.
std::map<std::string, RunRequest> planned(const std::string& study, std::vector<std::string> overrides,
                                          std::vector<std::string> grid = {}) {
  StudyOptions o{.quick = true, .overrides = std::move(overrides), .grid = std::move(grid)};
  std::map<std::string, RunRequest> out;
  for (RunRequest& r : plan_study(find_study(study), o)) out.emplace(r.id, std::move(r));
  return out;
}

std::string plan_error(const std::string& study, std::vector<std::string> overrides,
                       std::vector<std::string> grid = {}) {
  try {
    planned(study, std::move(overrides), std::move(grid));
  } catch (const Error& e) {
    return e.what();
  }
  return "(planned without an error)";
}

// Arms are defined relative to the configured model: stream-at-init's d_ff = d and 4d arms follow
// --set model.d_model, and a warm-up that is a fraction of the run follows --set train.steps.
TEST(StudyPlan, ArmsFollowTheConfiguredModel) {
  const auto runs = planned("stream-at-init", {"model.d_model=96"});
  ASSERT_EQ(runs.size(), 3u);
  const auto d_ff = [&](const std::string& id) { return runs.at(id).config["model"]["d_ff"].get<int>(); };
  EXPECT_EQ(d_ff("pre-s1"), 96);
  EXPECT_EQ(d_ff("post-s1"), 96);
  EXPECT_EQ(d_ff("pre-ffn4-s1"), 384);
  EXPECT_EQ(runs.at("pre-s1").config["model"]["d_model"], 96);
  EXPECT_EQ(planned("stream-at-init", {}).at("pre-ffn4-s1").config["model"]["d_ff"].get<int>(), 256);
  // why-pre-ln warms up for half the run: 30 of the quick preset's 60 steps, 50 of 100.
  const auto why = planned("why-pre-ln", {"train.steps=100"});
  EXPECT_TRUE(why.contains("train-post-L6-w50-s1"));
  EXPECT_EQ(why.at("train-post-L6-w50-s1").config["train"]["warmup"], 50);
  EXPECT_TRUE(planned("why-pre-ln", {}).contains("train-post-L6-w30-s1"));
  // A depth set for every run (not an axis there) reaches the judge's layer count too.
  EXPECT_EQ(planned("depth-variance", {"model.n_layers=6"}).at("pre-s1").config["model"]["n_layers"], 6);
}

// --large: every study plans d 256 models (the preset's overrides pass the same checks as a user's --set), more
// training (layer-steps) than its default preset where it trains, and the user's --set still wins.
TEST(StudyPlan, LargePresetGrowsEveryStudysModelAndRuns) {
  for (const Study* s : all_studies()) {
    SCOPED_TRACE(s->name);
    StudyOptions standard, large;
    const std::vector<RunRequest> small = plan_study(*s, standard);
    use_large_preset(*s, large);
    const std::vector<RunRequest> big = plan_study(*s, large);
    EXPECT_EQ(large.seeds.size(), standard.seeds.size());
    int deepest_small = 0, deepest_big = 0;
    for (const RunRequest& r : small) deepest_small = std::max(deepest_small, r.config["model"].value("n_layers", 0));
    for (const RunRequest& r : big) {
      const Json c = resolve_config(r.config, r.id);
      EXPECT_EQ(c["model"]["d_model"], 256) << r.id;
      deepest_big = std::max(deepest_big, c["model"]["n_layers"].get<int>());
    }
    EXPECT_GE(deepest_big, std::max(deepest_small, 12));
    if (layer_steps(small) > 0) {
      EXPECT_GT(layer_steps(big), 2 * layer_steps(small));
    }
  }
  StudyOptions mine{.overrides = {"train.steps=50"}};
  use_large_preset(find_study("why-pre-ln"), mine);
  for (const RunRequest& r : plan_study(find_study("why-pre-ln"), mine))
    if (r.kind == "train") {
      EXPECT_EQ(resolve_config(r.config, r.id)["train"]["steps"], 50) << r.id;
    }
  StudyOptions both{.quick = true};
  EXPECT_THROW(use_large_preset(find_study("why-pre-ln"), both), Error);
  // The flagship's --large: per seed 6 inits and 4 trainings at 24 layers, none with Xavier init.
  StudyOptions flagship;
  use_large_preset(find_study("why-pre-ln"), flagship);
  const std::vector<RunRequest> flagship_runs = plan_study(find_study("why-pre-ln"), flagship);
  EXPECT_EQ(flagship_runs.size(), 30u);
  for (const RunRequest& r : flagship_runs) EXPECT_NE(r.id.rfind("xavier", 0), 0u) << r.id;
}

// --grid replaces an axis's values: the runs, their ids and their configs follow.
TEST(StudyPlan, GridReplacesAnAxis) {
  const auto runs = planned("grad-by-depth", {}, {"model.n_layers=2,3"});
  std::set<std::string> ids;
  for (const auto& [id, r] : runs) ids.insert(id);
  EXPECT_EQ(ids,
            (std::set<std::string>{"xavier-post-L2-s1", "xavier-post-L3-s1", "xavier-pre-L2-s1", "xavier-pre-L3-s1",
                                   "gpt2-post-L2-s1", "gpt2-post-L3-s1", "gpt2-pre-L2-s1", "gpt2-pre-L3-s1"}));
  EXPECT_EQ(runs.at("gpt2-pre-L3-s1").config["model"]["n_layers"], 3);
  EXPECT_EQ(planned("grad-by-depth", {}, {"init=gpt2"}).size(), 6u);
  const auto grid = planned("warmup-grid", {}, {"train.lr=3e-4,3e-3", "train.warmup=0,20"});
  ASSERT_TRUE(grid.contains("post-L6-lr0.003-w20-s1"));
  EXPECT_EQ(grid.at("post-L6-lr0.003-w20-s1").config["train"]["lr"], 3e-3);
  EXPECT_EQ(grid.at("post-L6-lr0.003-w20-s1").config["train"]["warmup"], 20);
  EXPECT_EQ(grid.size(), 4u * 2 * 2 * 2);
  const auto dyt = planned("dyt-alpha", {}, {"model.options.dyt_alpha=0.25,1,8"});
  EXPECT_TRUE(dyt.contains("dyt-a0.25-s1") && dyt.contains("dyt-a8-s1") && !dyt.contains("dyt-a2-s1"));
}

// A --set of a field the study varies is refused before anything runs: an axis points to --grid, an
// arm's field (placement, d_ff) says the labels would lie. Unknown --grid keys and mistyped values too.
TEST(StudyPlan, RefusesSetsOfVariedFieldsAndBadGrids) {
  const std::string axis = plan_error("grad-by-depth", {"model.n_layers=8"});
  EXPECT_NE(axis.find("--set model.n_layers=8: model.n_layers is an axis of study grad-by-depth"), std::string::npos)
      << axis;
  EXPECT_NE(axis.find("--grid model.n_layers=V1,V2,..."), std::string::npos) << axis;
  EXPECT_NE(axis.find("nothing was run"), std::string::npos) << axis;
  EXPECT_NE(plan_error("grad-by-depth", {"model.init.scheme=xavier"}).find("--grid init="), std::string::npos);
  EXPECT_NE(plan_error("warmup-grid", {"train.lr=1e-3"}).find("--grid train.lr="), std::string::npos);
  const std::string arm = plan_error("depth-variance", {"model.placement=post"});
  EXPECT_NE(arm.find("study depth-variance varies model.placement between its runs (gpas, lns, pre)"),
            std::string::npos)
      << arm;
  EXPECT_NE(plan_error("stream-at-init", {"model.d_ff=128"}).find("--grid d_ff_multiple="), std::string::npos);
  // Fields every run shares stay free: the corpus, the width, the training length.
  EXPECT_NO_THROW(planned("warmup-grid", {"model.d_model=96", "train.steps=40", "model.dropout=0.1"}));

  const std::string unknown = plan_error("one-step", {}, {"model.d_model=64,128"});
  EXPECT_NE(unknown.find("--grid model.d_model=64,128: model.d_model is not an axis of study one-step (its axes: "
                         "model.n_layers;"),
            std::string::npos)
      << unknown;
  EXPECT_NE(plan_error("depth-variance", {}, {"model.n_layers=4"}).find("its axes: none, its arms are fixed"),
            std::string::npos);
  const std::string typed = plan_error("one-step", {}, {"model.n_layers=2,deep"});
  EXPECT_NE(typed.find("expected integers like the preset's (3,6,12,24), not \"deep\""), std::string::npos) << typed;
  EXPECT_NE(plan_error("grad-by-depth", {}, {"init=xavier,orthogonal"}).find("is not one of xavier,gpt2"),
            std::string::npos);
  const std::string bad = plan_error("one-step", {}, {"model.n_layers=0,2"});
  EXPECT_NE(bad.find("--grid model.n_layers=0,2: "), std::string::npos) << bad;
  EXPECT_NE(bad.find("nothing was run"), std::string::npos) << bad;
}

// A mean over seeds with a missing number (NaN) is no mean: a sub-claim is never decided on fewer seeds.
TEST(StudyVerdict, NaNIsNoEvidence) {
  EXPECT_TRUE(std::isnan(seed_mean({1, 2, 3}, [](int seed) { return seed == 2 ? NAN : double(seed); })));
  EXPECT_EQ(seed_mean({1, 2, 3}, [](int seed) { return double(seed); }), 2.0);
  const auto each = seed_mean_each({1, 2}, 2, [](int seed) {
    return seed == 1 ? std::vector<double>{1, 2} : std::vector<double>{3};
  });
  EXPECT_EQ(each[0], 2.0);
  EXPECT_TRUE(std::isnan(each[1])) << "a seed without a value there";
}

// The outcome classes of kit.h: diverged from the runner's status; trained when the final training loss
// (mean of the last 3 logs) is below the unigram entropy − 0.25; above it, stalled or slow.
TEST(StudyKit, ClassifiesRunsAsTrainedStalledOrDiverged) {
  TempDir tmp("study");
  const auto fake_run = [&](const std::string& id, std::vector<double> losses, RunStatus status) {
    RunOutcome o{{id, Json::object()}, tmp / id, status};
    fs::create_directories(o.dir / "run");
    std::string metrics;
    for (size_t i = 0; i < losses.size(); ++i)
      metrics += Json{{"type", "train"}, {"step", 10 * (i + 1)}, {"loss", losses[i]}}.dump() + "\n";
    spit(o.dir / "run" / "metrics.jsonl",
         metrics + Json{{"type", "eval"}, {"step", 40}, {normlab::train::field::val_loss, 4.5}}.dump() + "\n");
    spit(o.dir / "run" / "summary.json",
         Json{{normlab::train::field::val_loss, 4.5}, {"unigram_entropy_nats", 6.0}, {"seconds", 2.0}}.dump());
    return o;
  };
  const RunOutcome trained = fake_run("a", {7.0, 6.0, 5.8, 5.7, 5.6}, RunStatus::finished);  // last 3: 5.7
  // Above 6 − 0.25 = 5.75: on a plateau (the last quarter of the logs no lower than the one before) is
  // stalled; still falling by ≥ 0.1 per quarter is slow.
  const RunOutcome stalled = fake_run("b", {7.0, 6.0, 5.8, 5.8, 5.8, 5.8, 5.8, 5.8}, RunStatus::finished);
  const RunOutcome slow = fake_run("d", {7.0, 6.6, 6.4, 6.2, 6.0, 5.9, 5.8, 5.8}, RunStatus::finished);
  const RunOutcome diverged = fake_run("c", {7.0}, RunStatus::diverged);
  const RunOutcome no_loss = fake_run("e", {NAN, NAN, NAN}, RunStatus::finished);
  EXPECT_EQ(train_result(&trained).outcome, Outcome::trained);
  EXPECT_NEAR(train_result(&trained).final_loss, 5.7, 1e-12);
  EXPECT_EQ(train_result(&trained).val_loss, 4.5);
  EXPECT_EQ(train_result(&stalled).outcome, Outcome::stalled);
  EXPECT_EQ(train_result(&slow).outcome, Outcome::slow);
  EXPECT_EQ(train_result(&diverged).outcome, Outcome::diverged);
  EXPECT_EQ(train_result(nullptr).outcome, Outcome::missing);
  EXPECT_EQ(train_result(&no_loss).outcome, Outcome::failed) << "a NaN final loss is not a trained run";
  // The statistic of "it trained" claims: the final training loss above the line 6 − 0.25, a diverged run at the
  // unigram entropy (+0.25), a failed one missing.
  EXPECT_NEAR(loss_above_trained_line(&trained), 5.7 - 5.75, 1e-12);
  EXPECT_NEAR(loss_above_trained_line(&stalled), 5.8 - 5.75, 1e-12);
  EXPECT_NEAR(loss_above_trained_line(&diverged), 0.25, 1e-12);
  EXPECT_EQ(final_loss_or_unigram(&diverged), 6.0);
  EXPECT_EQ(val_loss_or_unigram(&diverged), 6.0);
  EXPECT_TRUE(std::isnan(loss_above_trained_line(&no_loss)));
  EXPECT_TRUE(std::isnan(final_loss_or_unigram(nullptr)));
  const Table t = outcome_table("runs", {trained, stalled, diverged, slow});
  EXPECT_EQ(t.row_class, (std::vector<std::string>{"trained", "stalled", "diverged", "slow"}));
}

Json sweep_file(int steps) {
  return Json{{"base", tiny_config_doc(steps)}, {"grid", {{"model.placement", {"pre", "post", "peri"}}}}, {"seeds", 1}};
}

// Starts `normlab args...` in its own process group, waits until `first_done` exists (its first run
// has finished), then kills the whole group (the grid and its running child) without warning.
void run_then_kill_after_first(const std::vector<std::string>& args, const fs::path& first_done) {
  const pid_t pid = train::testing::start_cli(args);
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 900 && !fs::exists(first_done); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  train::testing::kill_cli(pid);
  ASSERT_TRUE(fs::exists(first_done)) << "the first run did not finish in time";
}

// `normlab study layer-importance --quick` on the tiny corpus, one run at a time, with `extra` options: the
// study the kill tests interrupt.
std::vector<std::string> killed_study_args(const fs::path& dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"study",
                                   "layer-importance",
                                   "--quick",
                                   "--out",
                                   dir.string(),
                                   "--set",
                                   "data.dir=" + tiny_data_dir().string(),
                                   "--jobs",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

int finished_runs(const fs::path& dir) {
  int n = 0;
  for (const auto& run : fs::directory_iterator(dir / "runs")) n += fs::exists(run.path() / "status.json");
  return n;
}

// A run id names a folder under <study>/runs: one that would lead elsewhere, or two runs sharing one,
// is refused before anything is created.
TEST(StudyRunner, RefusesRunIdsThatLeaveTheRunsFolder) {
  TempDir tmp("study");
  const fs::path dir = tmp / "grid";
  for (const std::string id : {"../escape", "/abs", "a/b", ".hidden", "", "x\ny"}) {
    SCOPED_TRACE(id);
    try {
      run_grid(dir, {RunRequest{.id = id, .config = Json::object()}}, {.quiet = true});
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot name a folder"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(
      run_grid(dir,
               {RunRequest{.id = "same", .config = Json::object()}, RunRequest{.id = "same", .config = Json::object()}},
               {.quiet = true}),
      Error);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(tmp / "escape"));
}

// What docs/studies.md commits of a large preset run in pieces: scripts/keep-runs.sh copies a study's ended runs
// without their tensor files, and a study pointed at the copy reuses them; a run that had not ended is left out
// and runs there.
TEST(StudyRunner, RunsKeptWithoutTheirTensorsAreReusedWhereTheyAreCopied) {
  TempDir tmp("study");
  spit(tmp / "sweep.json", sweep_file(30).dump());
  const fs::path first = tmp / "first", kept = tmp / "kept";
  const auto made = run_cli({"sweep", (tmp / "sweep.json").string(), "--out", first.string()}, tmp.path());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  ASSERT_TRUE(fs::exists(first / "runs" / "placement-pre_s1" / "run" / train::kCheckpointFile));
  fs::remove(first / "runs" / "placement-peri_s1" / "status.json");  // as if it were still training
  const std::string keep =
      fmt::format("bash {}/scripts/keep-runs.sh {} {} > /dev/null", NORMLAB_SOURCE_DIR, first.string(), kept.string());
  ASSERT_EQ(std::system(keep.c_str()), 0) << keep;
  EXPECT_FALSE(fs::exists(kept / "runs" / "placement-peri_s1"));
  for (const auto& e : fs::recursive_directory_iterator(kept)) {
    EXPECT_NE(e.path().extension(), ".safetensors") << e.path();
    EXPECT_NE(e.path().filename(), train::kCheckpointJson) << e.path();
  }

  const auto r = run_cli({"sweep", (tmp / "sweep.json").string(), "--out", kept.string()}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("2 of 3 runs already done"), std::string::npos) << r.err;
  EXPECT_EQ(finished_runs(kept), 3);
  EXPECT_EQ(slurp(kept / "runs" / "placement-pre_s1" / "status.json"),
            slurp(first / "runs" / "placement-pre_s1" / "status.json"));
  // Each run's status.json names the normlab that ran it, and the report counts the runs each made.
  const Json status = Json::parse(slurp(kept / "runs" / "placement-peri_s1" / "status.json"));
  ASSERT_TRUE(status.contains("normlab")) << status.dump();
  EXPECT_NE(slurp(kept / "report.md")
                .find(fmt::format("runs made by (status.json): {} (3 runs)", status["normlab"].get<std::string>())),
            std::string::npos)
      << slurp(kept / "report.md");
}

TEST(StudyRunner, AKilledSweepFinishesOnlyTheRemainingRuns) {
  TempDir tmp("study");
  spit(tmp / "sweep.json", sweep_file(400).dump());
  const fs::path dir = tmp / "sweep";
  const fs::path first = dir / "runs" / "placement-pre_s1" / "status.json";
  run_then_kill_after_first({"sweep", (tmp / "sweep.json").string(), "--out", dir.string(), "--jobs", "1"}, first);
  ASSERT_EQ(finished_runs(dir), 1);
  const std::string first_status = slurp(first);
  const auto first_time = fs::last_write_time(first);

  const auto r = run_cli({"sweep", (tmp / "sweep.json").string(), "--out", dir.string()}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 of 3 runs already done"), std::string::npos) << r.err;
  EXPECT_EQ(finished_runs(dir), 3);
  EXPECT_EQ(slurp(first), first_status);
  EXPECT_EQ(fs::last_write_time(first), first_time) << "the finished run was run again";
  // A rerun of a complete sweep runs nothing.
  const auto again = run_cli({"sweep", (tmp / "sweep.json").string(), "--out", dir.string()}, tmp.path());
  EXPECT_NE(again.err.find("3 of 3 runs already done"), std::string::npos) << again.err;
  EXPECT_NE(slurp(dir / "summary.csv").find("placement-peri_s1,train,finished"), std::string::npos);
  // A sweep tests no claim: no verdict, and each run's outcome by the studies' rule.
  const std::string md = slurp(dir / "report.md");
  EXPECT_EQ(md.find("Verdict"), std::string::npos) << md;
  EXPECT_NE(md.find("| run | outcome | final train loss | val loss | seconds |"), std::string::npos) << md;
  EXPECT_TRUE(std::regex_search(md, std::regex(R"(\| placement-pre_s1 \| (trained|slow|stalled) \|)"))) << md;
  EXPECT_NE(slurp(tmp / "studies.html").find("sweep/report.html"), std::string::npos);
}

// The same for a named study whose runs train and then probe their checkpoint (two stages per run).
TEST(StudyRunner, AKilledStudyFinishesOnlyTheRemainingRuns) {
  TempDir tmp("study");
  const fs::path dir = tmp / "importance";
  const auto args = killed_study_args(dir);
  const fs::path first = dir / "runs" / "pre-s1" / "status.json";
  run_then_kill_after_first(args, first);
  ASSERT_EQ(finished_runs(dir), 1);
  const auto first_time = fs::last_write_time(first);
  const auto r = run_cli(args, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 of 3 runs already done"), std::string::npos) << r.err;
  EXPECT_EQ(finished_runs(dir), 3);
  EXPECT_EQ(fs::last_write_time(first), first_time) << "the finished run was run again";
  for (const char* run : {"pre-s1", "post-s1", "lns-s1"})
    EXPECT_NE(slurp(dir / "runs" / run / "analysis.jsonl").find("layer-drop"), std::string::npos) << run;
}

// A study killed in the middle of a training run resumes that run from its last checkpoint, and the
// resumed run's numbers are those of an uninterrupted one. A run killed after its final checkpoint but
// before its summary is finished from that checkpoint.
TEST(StudyRunner, AKilledStudyResumesTheInterruptedRunFromItsCheckpoint) {
  TempDir tmp("study");
  const fs::path dir = tmp / "importance";
  // Small batches so the 300 steps are quick; checkpoints every 75 steps.
  const auto args =
      killed_study_args(dir, {"--set", "train.steps=300", "--set", "train.batch_size=4", "--set", "train.seq_len=16"});
  const fs::path run = dir / "runs" / "pre-s1" / "run";
  run_then_kill_after_first(args, run / "checkpoint.json");
  ASSERT_FALSE(fs::exists(run / "summary.json")) << "the run finished before the kill: nothing was interrupted";
  EXPECT_EQ(Json::parse(slurp(run / "config.json"))["train"]["checkpoint_every"], 75);

  const auto r = run_cli(args, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex(R"(study: pre-s1 resumes from its checkpoint at step (\d+))")))
      << r.err;
  const int step = std::stoi(m[1]);
  EXPECT_TRUE(step > 0 && step < 300 && step % 75 == 0) << step;
  EXPECT_NE(slurp(run.parent_path() / "log.txt").find(fmt::format("resumed {} at step {}", run.string(), step)),
            std::string::npos);
  EXPECT_EQ(finished_runs(dir), 3);

  // The same config trained straight (with the same 2 threads): identical losses, step for step.
  const fs::path straight = tmp / "straight";
  const auto s = run_cli({"train", "--config", (run / "config.json").string(), "--run", straight.string()}, tmp.path());
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto resumed = train::testing::train_records(run);
  ASSERT_FALSE(resumed.empty());
  train::testing::expect_identical_records(train::testing::train_records(straight), resumed);

  // Killed after the final checkpoint, before summary.json: the rerun finishes it without training.
  const Json summary = Json::parse(slurp(run / "summary.json"));
  fs::remove(run / "summary.json");
  fs::remove(run.parent_path() / "status.json");
  const auto again = run_cli(args, tmp.path());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("study: pre-s1 resumes from its checkpoint at step 300"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("2 of 3 runs already done"), std::string::npos) << again.err;
  const Json completed = Json::parse(slurp(run / "summary.json"));
  EXPECT_EQ(completed[normlab::train::field::val_loss], summary[normlab::train::field::val_loss]);
  EXPECT_EQ(completed["train_loss"], summary["train_loss"]);
}

// A symbolic link planted at a run's log.txt is refused, not written through.
TEST(StudyRunner, RefusesASymlinkedRunLog) {
  TempDir tmp("study");
  spit(tmp / "sweep.json", Json{{"base", tiny_config_doc(2)}, {"grid", {{"model.placement", {"pre"}}}}}.dump());
  const fs::path dir = tmp / "sweep";
  const std::vector<std::string> args = {"sweep", (tmp / "sweep.json").string(), "--out", dir.string()};
  const auto first = run_cli(args, tmp.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const fs::path run = dir / "runs" / "placement-pre_s1";
  fs::remove(run / "status.json");  // as if the grid had been killed during this run
  fs::remove(run / "log.txt");
  spit(tmp / "victim", "untouched");
  fs::create_symlink(tmp / "victim", run / "log.txt");
  const auto again = run_cli(args, tmp.path());
  train::testing::expect_cli_error(again, {"log.txt", "symbolic link"});
  EXPECT_EQ(slurp(tmp / "victim"), "untouched");
}

// summary.csv without the seconds column: what a killed-and-resumed study must reproduce exactly.
std::string summary_without_seconds(const fs::path& dir) {
  std::istringstream in(slurp(dir / "summary.csv"));
  std::string out;
  for (std::string line; std::getline(in, line);) {
    size_t comma = 0;
    for (int i = 0; i < 3 && comma != std::string::npos; ++i) comma = line.find(',', comma + 1);
    const size_t end = comma == std::string::npos ? comma : line.find(',', comma + 1);
    out += (comma == std::string::npos || end == std::string::npos ? line : line.erase(comma, end - comma)) + "\n";
  }
  return out;
}

// The evidence and verdict lines of report.md (the measured numbers, not the times).
std::string report_numbers(const fs::path& dir) {
  std::istringstream in(slurp(dir / "report.md"));
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("- ") || line.starts_with("## Verdict")) out += line + "\n";
  return out;
}

// How far a study of training runs has come, in events its files show: each train step its runs have logged
// (the last logged step, which a resume cuts back to its checkpoint's), each run's analysis, each run's end.
int study_progress(const fs::path& dir) {
  int events = 0;
  std::error_code ec;
  for (const auto& run : fs::directory_iterator(dir / "runs", ec)) {
    std::ifstream in(run.path() / "run" / "metrics.jsonl");
    int step = 0;
    for (std::string line; std::getline(in, line);) {
      const Json j = Json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("step") && j["step"].is_number_integer()) step = j["step"].get<int>();
    }
    events += step + fs::exists(run.path() / "analysis.jsonl") + fs::exists(run.path() / "status.json");
  }
  return events;
}

// metrics.jsonl without the wall-clock fields (elapsed_s, tokens_per_s): what a resumed run must log exactly.
std::string logged_numbers(const fs::path& run) {
  std::string out;
  for (auto j : train::testing::read_metrics(run)) {
    j.erase("elapsed_s");
    j.erase("tokens_per_s");
    out += j.dump() + "\n";
  }
  return out;
}

// The kill -9 soak of a study: the `normlab study` process alone (not its process group) is SIGKILLed several
// times, each at a seeded random point of its progress (a number of logged steps and run ends, not a clock time, so
// every kill lands mid-study at any machine load), and rerun at once. Its runs' processes die with it (none is
// left to write beside the rerun's), and the finished study reports the numbers of an uninterrupted one, with
// byte-identical checkpoints and logs. NORMLAB_SOAK_STUDY_KILLS sets the number of kills (default 3; scripts/soak.sh
// runs more).
TEST(StudyRunner, AStudyKilledAtRandomMomentsReportsTheUninterruptedNumbers) {
  const char* env = std::getenv("NORMLAB_SOAK_STUDY_KILLS");
  const int kills = env && std::atoi(env) > 0 ? std::atoi(env) : 3;
  TempDir tmp("study");
  const std::vector<std::string> small = {"--set", "train.steps=60",  "--set", "train.batch_size=4",
                                          "--set", "train.seq_len=16"};
  const auto straight = run_cli(killed_study_args(tmp / "straight", small), tmp.path());
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const int total = study_progress(tmp / "straight");
  ASSERT_GT(total, 3 * 60);

  const fs::path dir = tmp / "killed";
  const auto args = killed_study_args(dir, small);
  std::mt19937_64 rng(1130);
  int interrupted = 0;
  std::vector<train::testing::ProcessId> left;  // the killed studies' processes
  for (int k = 0; k < kills; ++k) {
    // A point between here and an even share of what is left, so that the kills spread over the whole study.
    const int done = study_progress(dir);
    const int share = std::max(1, (total - done) / std::max(1, kills - k));
    const int target = std::min(total - 1, done + std::uniform_int_distribution<int>(1, share)(rng));
    const pid_t pid = train::testing::start_cli(args, tmp / "killed.log");  // at once after the last kill
    ASSERT_GT(pid, 0);
    bool exited = false;
    while (!(exited = train::testing::cli_exited(pid)) && study_progress(dir) < target)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (exited) break;
    const auto processes = train::testing::descendants(pid);
    left.insert(left.end(), processes.begin(), processes.end());
    train::testing::kill_alone(pid);
    ++interrupted;
  }
  const auto r = run_cli(args, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(interrupted, 1);
  std::cerr << "soak: " << interrupted << " of " << kills << " kills interrupted the study, " << left.size()
            << " of its processes died with it\n";
  for (const auto& p : left) {  // dead long ago: the generous bound only matters on a starved machine
    for (int i = 0; i < 6000 && !train::testing::ended(p); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_TRUE(train::testing::ended(p)) << "process " << p.pid << " outlived the study that started it";
  }
  EXPECT_EQ(summary_without_seconds(tmp / "straight"), summary_without_seconds(dir));
  EXPECT_EQ(report_numbers(tmp / "straight"), report_numbers(dir));
  for (const char* run : {"pre-s1", "post-s1", "lns-s1"}) {
    SCOPED_TRACE(run);
    const fs::path a = tmp / "straight" / "runs" / run, b = dir / "runs" / run;
    EXPECT_EQ(slurp(a / "analysis.jsonl"), slurp(b / "analysis.jsonl"));
    EXPECT_TRUE(slurp(a / "run" / train::kCheckpointFile) == slurp(b / "run" / train::kCheckpointFile))
        << "the checkpoints differ";
    EXPECT_EQ(logged_numbers(a / "run"), logged_numbers(b / "run"));
  }
}

// The report carries measured numbers, not placeholders: every sub-claim's row gives a number for each seed
// (the table under "Sub-claims"), and the evidence lines (the "- " list under the verdict) have no n/a.
void expect_measured_evidence(const std::string& md) {
  std::istringstream in(md);
  int rows = 0;
  bool in_claims = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("**Sub-claims")) in_claims = true;
    if (in_claims && line.empty() && rows > 0) in_claims = false;
    if (in_claims && line.starts_with("| ") && !line.starts_with("|  |") && !line.starts_with("|---")) {
      ++rows;
      std::vector<std::string> cells;
      for (size_t start = 1, bar; (bar = line.find(" | ", start)) != std::string::npos; start = bar + 3)
        cells.push_back(line.substr(start, bar - start));
      ASSERT_GE(cells.size(), 4u) << line;
      EXPECT_TRUE(std::regex_search(cells[3], std::regex("^ ?[0-9]+: -?[0-9]"))) << "per-seed values: " << line;
      EXPECT_EQ(cells[3].find("n/a"), std::string::npos) << line;
      EXPECT_EQ(cells[3].find("nan"), std::string::npos) << line;
    }
    if (line.starts_with("- ")) {
      EXPECT_EQ(line.find("n/a"), std::string::npos) << line;
      EXPECT_EQ(line.find("nan"), std::string::npos) << line;
      EXPECT_TRUE(std::regex_search(line, std::regex("[0-9]"))) << line;
    }
  }
  EXPECT_GT(rows, 0) << md;
}

TEST(StudyFlagship, QuickPresetJudgesRealRunsAndRenders) {
  TempDir tmp("study");
  const auto r = run_cli({"study", "why-pre-ln", "--quick", "--out", (tmp / "flagship").string(), "--set",
                          "data.dir=" + tiny_data_dir().string(), "--jobs", "2"},
                         tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = slurp(tmp / "flagship" / "report.md");
  std::smatch verdict;
  ASSERT_TRUE(std::regex_search(md, verdict,
                                std::regex("## Verdict: (reproduced|partly reproduced|not reproduced|inconclusive)")));
  // The evidence lines carry measured numbers, not placeholders.
  expect_measured_evidence(md);
  EXPECT_NE(md.find("A. last-layer fc2 gradient at init"), std::string::npos);
  for (const char* run : {"train-post-L6-w0-s1", "train-pre-L6-w30-s1", "init-pre-L2-s1"})
    EXPECT_NE(slurp(tmp / "flagship" / "summary.csv").find(std::string(run) + ","), std::string::npos) << run;
  expect_rendered(render_in_chromium(tmp / "flagship" / "report.html", "why-pre-ln-quick"));
}

// Every other study: its quick preset runs for real on the tiny corpus, every run finishes, the
// report states a verdict with measured evidence, and it renders in chromium with every chart drawn.
class StudyQuick : public ::testing::TestWithParam<std::string> {};

TEST_P(StudyQuick, RunsJudgesAndRenders) {
  const std::string name = GetParam();
  TempDir tmp("study");
  const fs::path dir = tmp / name;
  const fs::path data = name == "mt-depth" ? tiny_pairs_dir() : tiny_data_dir();  // translation reads pairs
  const auto r =
      run_cli({"study", name, "--quick", "--out", dir.string(), "--set", "data.dir=" + data.string(), "--jobs", "2"},
              tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string md = slurp(dir / "report.md");
  EXPECT_TRUE(
      std::regex_search(md, std::regex("## Verdict: (reproduced|partly reproduced|not reproduced|inconclusive)")))
      << md;
  EXPECT_NE(md.find("**Rule.**"), std::string::npos);
  expect_measured_evidence(md);
  // summary.csv: a header and one finished run per line.
  std::istringstream csv(slurp(dir / "summary.csv"));
  std::string line;
  std::getline(csv, line);
  int runs = 0;
  while (std::getline(csv, line)) {
    ++runs;
    EXPECT_NE(line.find(",finished,"), std::string::npos) << line;
  }
  EXPECT_GT(runs, 0);
  expect_rendered(render_in_chromium(dir / "report.html", name + "-quick"));
}

std::vector<std::string> other_studies() {
  std::vector<std::string> names;
  for (const Study* s : all_studies())
    if (s->name != "why-pre-ln") names.emplace_back(s->name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(All, StudyQuick, ::testing::ValuesIn(other_studies()), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
});

// A typo in --set stops the study before any run starts, with one error naming the field.
TEST(StudyCli, ABadOverrideStopsBeforeAnyRun) {
  TempDir tmp("study");
  const fs::path dir = tmp / "grid";
  const auto r =
      run_cli({"study", "warmup-grid", "--quick", "--out", dir.string(), "--set", "train.lrr=1"}, tmp.path());
  train::testing::expect_cli_error(r, {"--set train.lrr=1", "train.lrr is not a run-config field", "nothing was run"});
  EXPECT_FALSE(fs::exists(dir / "runs"));
  const auto typed =
      run_cli({"study", "warmup-grid", "--quick", "--out", dir.string(), "--set", "train.lr=fast"}, tmp.path());
  train::testing::expect_cli_error(typed, {"train.lr: expected a number", "nothing was run"});
  EXPECT_FALSE(fs::exists(dir / "runs"));
}

// A study with a run that fails reports incomplete, names the run and its error line, and exits 1;
// a finished run is reused only while its request matches, and --fresh runs everything again.
TEST(StudyCli, AFailedRunMakesTheStudyIncompleteAndReuseFollowsTheRequest) {
  TempDir tmp("study");
  const fs::path dir = tmp / "stream";
  const std::vector<std::string> args = {
      "study",  "stream-at-init", "--quick", "--out", dir.string(), "--set", "data.dir=" + tiny_data_dir().string(),
      "--grid", "d_ff_multiple=4"};
  const auto first = run_cli(args, tmp.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(finished_runs(dir), 3);
  const std::string md = slurp(dir / "report.md");
  EXPECT_NE(md.find("## Reproduce"), std::string::npos);
  EXPECT_NE(md.find("data.dir=" + tiny_data_dir().string()), std::string::npos) << "the overrides are recorded";
  EXPECT_NE(md.find("grid (--grid, replacing an axis's values): d_ff_multiple=4"), std::string::npos)
      << "the grid is recorded";
  EXPECT_NE(md.find("meta.json fnv1a64 "), std::string::npos) << "the corpus checksum is recorded";
  const auto verdict = Json::parse(slurp(dir / "report.json"))["verdict"].get<std::string>();
  const std::string index = slurp(tmp / "studies.html");  // each finished study refreshes the index beside it
  EXPECT_NE(index.find("<a href=\"stream/report.html\">stream</a>"), std::string::npos) << index;
  EXPECT_NE(index.find("\">" + verdict + "</td>"), std::string::npos) << index;

  // The probe cannot write its analysis.jsonl (a directory stands there): that run fails on rerun.
  const fs::path broken = dir / "runs" / "post-s1";
  fs::remove(broken / "status.json");
  fs::remove(broken / "analysis.jsonl");
  fs::create_directories(broken / "analysis.jsonl" / "blocker");
  const auto failed = run_cli(args, tmp.path());
  train::testing::expect_cli_error(failed,
                                   {"study stream-at-init is incomplete: 1 run(s) failed", "nothing was decided"});
  EXPECT_NE(failed.err.find("2 of 3 runs already done"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("study: failed run post-s1: "), std::string::npos) << failed.err;
  const std::string incomplete = slurp(dir / "report.md");
  EXPECT_NE(incomplete.find("## Verdict: incomplete"), std::string::npos) << incomplete;
  EXPECT_NE(incomplete.find("* post-s1: "), std::string::npos) << incomplete;
  EXPECT_NE(slurp(tmp / "studies.html").find("<td class=\"incomplete\">incomplete</td>"), std::string::npos);

  // Another request (a different seed) against the stored finished runs: refused, naming --fresh.
  std::vector<std::string> reseeded = args;
  reseeded.insert(reseeded.end(), {"--set", "train.seed=7"});
  fs::remove_all(broken / "analysis.jsonl");
  const auto refused = run_cli(reseeded, tmp.path());
  train::testing::expect_cli_error(refused,
                                   {"were made from another request", "config/train/seed was 1, now 7", "--fresh"});
  reseeded.push_back("--fresh");
  const auto fresh = run_cli(reseeded, tmp.path());
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_EQ(fresh.err.find("already done"), std::string::npos) << fresh.err;
  EXPECT_NE(slurp(dir / "runs" / "pre-s1" / "request.json").find("\"seed\": 7"), std::string::npos);
}

// Every study states the regime its paper makes its claim in, and its help shows it beside this preset's plan.
TEST(StudyCli, EveryStudysHelpShowsThePapersSettingBesideThePreset) {
  for (const Study* s : all_studies()) {
    EXPECT_FALSE(s->paper_setting.empty()) << s->name;
    const auto r = run_cli({"study", std::string(s->name), "--help"}, fs::current_path());
    ASSERT_EQ(r.exit_code, 0) << s->name << ": " << r.err;
    const size_t paper = r.out.find("\nthe paper's setting: " + std::string(s->paper_setting) + "\nthis preset (");
    EXPECT_NE(paper, std::string::npos) << s->name << "\n" << r.out;
  }
}

// `normlab study NAME --help` describes the study: claim, presets, seeds, its axes with their values, and
// examples; `normlab study --help` is the generic help.
TEST(StudyCli, HelpOfAStudyListsItsAxes) {
  const auto r = run_cli({"study", "grad-by-depth", "--help"}, fs::current_path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Study& s = find_study("grad-by-depth");
  for (const std::string& want :
       {std::string(s.title), std::string(s.claim), std::string(s.source), std::string(s.cost),
        std::string("seeds:  auto by default: 3 seeds"),
        std::string("the paper's setting: ") + std::string(s.paper_setting),
        std::string("this preset (48 runs at 3 seeds): 48 runs. Every run:"), std::string("  model.n_layers\n"),
        std::string("default: 6,12,24,48   --quick: 2,4,8   --large: 6,12,24,48"),
        std::string("large:  --large sets model.d_model=256"), std::string("  init\n"),
        std::string("values: xavier,gpt2"), std::string("normlab study grad-by-depth --grid model.n_layers=2,4,8"),
        std::string("--grid")})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  const auto none = run_cli({"study", "model-update", "--help"}, fs::current_path());
  EXPECT_NE(none.out.find("axes: none"), std::string::npos) << none.out;
  const auto generic = run_cli({"study", "--help"}, fs::current_path());
  ASSERT_EQ(generic.exit_code, 0) << generic.err;
  EXPECT_NE(generic.out.find("--grid"), std::string::npos) << generic.out;
  EXPECT_EQ(generic.out.find("claim:"), std::string::npos) << generic.out;
  const auto nameless = run_cli({"study"}, fs::current_path());
  EXPECT_NE(nameless.exit_code, 0);
  const auto two_presets = run_cli({"study", "one-step", "--large", "--quick"}, fs::current_path());
  EXPECT_NE(two_presets.exit_code, 0);
  EXPECT_NE(two_presets.err.find("--large and --quick are two presets"), std::string::npos) << two_presets.err;
}

TEST(StudyCli, ListsEveryStudyWithItsPaperAndCost) {
  const auto r = run_cli({"study", "list"}, fs::current_path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const Study* s : all_studies()) {
    EXPECT_NE(r.out.find(std::string(s->name)), std::string::npos) << s->name;
    EXPECT_NE(r.out.find(std::string(s->source)), std::string::npos) << s->name;
  }
}

}  // namespace
}  // namespace normlab::study
