// The index of normlab serve over studies (finished, running, nested inside a run folder) and over files it
// cannot read: each bad file marks its own run unreadable, with the reason, and /api/index still answers.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <malloc.h>

#include <map>

#include "serve/run_index.h"
#include "serve_helpers.h"
#include "train/records.h"

namespace normlab::serve {
namespace {

using namespace testing;
using train::testing::TempDir;

std::map<std::string, Json> by_path(const Json& entries) {
  std::map<std::string, Json> out;
  for (const Json& e : entries) out[e["path"].get<std::string>()] = e;
  return out;
}

// A finished study reads as its files say, whatever their age: the runner's status.json, the training's files in
// run/, the analysis-only run's analysis.jsonl. Its runs once showed at step 0 with no loss, as "running" or
// "stopped" by the age of their files, and an analysis-only run as "running 0 / 1".
TEST(ServeIndex, AFinishedStudyShowsWhatItsFilesSay) {
  for (const auto age : {std::chrono::seconds(0), std::chrono::seconds(3600)}) {
    TempDir tmp("serve");
    finished_study(tmp / "study-why-pre-ln", age);
    const Json index = RunIndex(fs::canonical(tmp.path())).scan();
    std::map<std::string, Json> runs = by_path(index["runs"]);
    ASSERT_EQ(runs.size(), 4u) << index.dump(2);
    const Json& pre = runs["study-why-pre-ln/runs/train-pre-L6-w0-s1"];
    EXPECT_EQ(pre["status"], "finished") << pre;
    EXPECT_EQ(pre["kind"], "train");
    EXPECT_EQ(pre["study"], "study-why-pre-ln");
    EXPECT_EQ(pre["files"], "study-why-pre-ln/runs/train-pre-L6-w0-s1/run");
    EXPECT_EQ(pre["step"], 20);
    EXPECT_EQ(pre["steps"], 20);
    EXPECT_NEAR(pre["loss"].get<double>(), 7.30, 1e-9);
    EXPECT_NEAR(pre[normlab::train::field::val_loss].get<double>(), 7.29, 1e-9);
    EXPECT_EQ(pre["placement"], "pre");
    EXPECT_EQ(pre["n_layers"], 6);
    EXPECT_EQ(runs["study-why-pre-ln/runs/train-post-L6-w0-s1"]["status"], "finished");
    const Json& init = runs["study-why-pre-ln/runs/init-pre-L2-s1"];
    EXPECT_EQ(init["status"], "finished") << init;
    EXPECT_EQ(init["kind"], "analysis");
    EXPECT_TRUE(init["files"].is_null());
    EXPECT_EQ(init["analysis"], "study-why-pre-ln/runs/init-pre-L2-s1/analysis.jsonl");
    EXPECT_EQ(init["step"], 1);
    EXPECT_EQ(init["steps"], 1);
    const Json& diverged = runs["study-why-pre-ln/runs/xavier-post-L6-w10-s1"];
    EXPECT_EQ(diverged["status"], "diverged");
    EXPECT_NE(diverged["message"].get<std::string>().find("layers.5.ffn.fc2"), std::string::npos);
    ASSERT_EQ(index["studies"].size(), 1u);
    const Json& study = index["studies"][0];
    EXPECT_EQ(study["status"], "finished") << study;
    EXPECT_EQ(study["runs"], 4);
    EXPECT_EQ(study["done"], 4);
    EXPECT_EQ(study["running"], 0);
    EXPECT_EQ(study["verdict"], "inconclusive");
  }
}

// A study while it runs: a finished training, a training and an analysis-only run under way (no status.json yet,
// files just written), an analysis-only run that ended a moment ago (its status.json says finished, however fresh
// its files), and a run that waits its turn (the runner wrote its request before starting any run).
TEST(ServeIndex, ARunningStudyShowsEachRunAsItsFilesSay) {
  TempDir tmp("serve");
  const fs::path study = tmp / "study-grad-by-depth";
  const fs::path done = study_run(study, "train-pre-L6-s1", "train", true);
  train_study_run(done, true);
  end_study_run(done, "finished");
  age_files(done, std::chrono::hours(1));
  train_study_run(study_run(study, "train-post-L6-s1", "train", true, "post"), false);
  study_run(study, "init-post-L6-s1", "probe", true, "post");
  const fs::path probed = study_run(study, "init-pre-L6-s1", "probe", true);
  write_grad_init(probed);
  end_study_run(probed, "finished");
  study_run(study, "xavier-post-L6-s1", "train", false, "post");

  const Json index = RunIndex(fs::canonical(tmp.path())).scan();
  std::map<std::string, Json> runs = by_path(index["runs"]);
  ASSERT_EQ(runs.size(), 5u) << index.dump(2);
  EXPECT_EQ(runs["study-grad-by-depth/runs/train-pre-L6-s1"]["status"], "finished");
  const Json& training = runs["study-grad-by-depth/runs/train-post-L6-s1"];
  EXPECT_EQ(training["status"], "running") << training;
  EXPECT_EQ(training["step"], 20);
  EXPECT_NEAR(training["loss"].get<double>(), 7.30, 1e-9);
  const Json& probing = runs["study-grad-by-depth/runs/init-post-L6-s1"];
  EXPECT_EQ(probing["status"], "running") << probing;
  EXPECT_EQ(probing["step"], 0);
  EXPECT_EQ(probing["steps"], 1);
  EXPECT_EQ(runs["study-grad-by-depth/runs/init-pre-L6-s1"]["status"], "finished");
  const Json& waiting = runs["study-grad-by-depth/runs/xavier-post-L6-s1"];
  EXPECT_EQ(waiting["status"], "queued") << waiting;
  EXPECT_TRUE(waiting["files"].is_null());
  for (const auto& [path, run] : runs) EXPECT_EQ(run["study"], "study-grad-by-depth") << path;
  ASSERT_EQ(index["studies"].size(), 1u);
  const Json& s = index["studies"][0];
  EXPECT_EQ(s["status"], "running") << s;
  EXPECT_EQ(s["runs"], 5);
  EXPECT_EQ(s["done"], 2);
  EXPECT_EQ(s["running"], 2);

  // Stopped before its end (the study was killed): the started runs are stopped, the waiting one still queued.
  age_files(study, std::chrono::hours(1));
  runs = by_path(RunIndex(fs::canonical(tmp.path())).scan()["runs"]);
  EXPECT_EQ(runs["study-grad-by-depth/runs/train-post-L6-s1"]["status"], "stopped");
  EXPECT_EQ(runs["study-grad-by-depth/runs/init-post-L6-s1"]["status"], "stopped");
  EXPECT_EQ(runs["study-grad-by-depth/runs/xavier-post-L6-s1"]["status"], "queued");
}

// The quickstart writes its study into its run's folder (runs/quickstart-*/study-why-pre-ln): both are listed.
TEST(ServeIndex, FindsAStudyNestedInsideARunFolder) {
  TempDir tmp("serve");
  const fs::path quickstart = tmp / "runs" / "quickstart-20250101-120000";
  fake_run(quickstart, {8.0, 7.0, 6.0});
  write_summary(quickstart, 6.0, 6.1);
  finished_study(quickstart / "study-why-pre-ln", std::chrono::seconds(0));
  const Json index = RunIndex(fs::canonical(tmp / "runs")).scan();
  std::map<std::string, Json> runs = by_path(index["runs"]);
  ASSERT_EQ(runs.size(), 5u) << index.dump(2);
  EXPECT_EQ(runs["quickstart-20250101-120000"]["status"], "finished");
  EXPECT_TRUE(runs["quickstart-20250101-120000"]["study"].is_null());
  const Json& pre = runs["quickstart-20250101-120000/study-why-pre-ln/runs/train-pre-L6-w0-s1"];
  EXPECT_EQ(pre["status"], "finished") << index.dump(2);
  EXPECT_EQ(pre["study"], "quickstart-20250101-120000/study-why-pre-ln");
  EXPECT_EQ(pre["step"], 20);
  ASSERT_EQ(index["studies"].size(), 1u);
  EXPECT_EQ(index["studies"][0]["path"], "quickstart-20250101-120000/study-why-pre-ln");
  EXPECT_EQ(index["studies"][0]["status"], "finished");
}

// Serves `root`, which holds a readable run "good" beside whatever the test spoiled, and returns /api/index's runs
// by path; /api/index must answer 200 with JSON whatever lies in the folder.
std::map<std::string, Json> served_runs(const fs::path& root) {
  fake_run(root / "good", {7.0, 6.0});
  write_summary(root / "good", 6.0, 6.1);
  LiveServer server(root);
  const std::string response = get(server.port(), "/api/index");
  EXPECT_EQ(status_of(response), 200) << response.substr(0, 2000);
  const Json index = Json::parse(body_of(response), nullptr, false);
  EXPECT_TRUE(index.is_object()) << response.substr(0, 2000);
  std::map<std::string, Json> runs = by_path(index.value("runs", Json::array()));
  EXPECT_EQ(runs["good"]["status"], "finished") << index.dump(2);
  EXPECT_EQ(runs["good"]["step"], 2);
  return runs;
}

// The run at `path` is listed as unreadable, its message naming what to fix.
void expect_unreadable(std::map<std::string, Json>& runs, const std::string& path, const std::string& reason) {
  ASSERT_TRUE(runs.contains(path)) << path;
  EXPECT_EQ(runs[path]["status"], "unreadable") << runs[path];
  EXPECT_NE(runs[path]["message"].get<std::string>().find(reason), std::string::npos)
      << runs[path]["message"] << " does not say " << reason;
}

// normlab itself writes such a name: `normlab train --run $'runs/\xff'`.
TEST(ServeUnreadable, ARunNameThatIsNotUtf8) {
  TempDir tmp("serve");
  fake_run(tmp / "bad-\xff\xfe", {7.0});
  std::map<std::string, Json> runs = served_runs(tmp.path());
  expect_unreadable(runs, "bad-\xEF\xBF\xBD\xEF\xBF\xBD", "not UTF-8");
  EXPECT_EQ(runs["bad-\xEF\xBF\xBD\xEF\xBF\xBD"]["viewable"], false);
  EXPECT_EQ(runs["good"]["viewable"], true);
}

TEST(ServeUnreadable, AMalformedStatusJson) {
  TempDir tmp("serve");
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"torn", {R"({"status": "fini)", "status.json is not valid JSON"}},
      {"number", {R"({"status": 3})", "status.json: status is not a string"}},
      {"unknown", {R"({"status": "exploded"})", "status is 'exploded', not finished"}},
      {"array", {R"(["finished"])", "status.json holds no JSON object"}}};
  for (const auto& [id, file] : cases) {
    const fs::path run = study_run(tmp / "study", id, "train", true);
    train_study_run(run, true);
    spit(run / "status.json", file.first);
  }
  std::map<std::string, Json> runs = served_runs(tmp.path());
  for (const auto& [id, file] : cases) expect_unreadable(runs, "study/runs/" + id, file.second);
}

TEST(ServeUnreadable, AMalformedConfigJson) {
  TempDir tmp("serve");
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"torn", {R"({"model": {"placement": "pre")", "config.json is not valid JSON"}},
      {"model", {R"({"model": [1, 2]})", "config.json: model is not an object"}},
      {"layers", {R"({"model": {"n_layers": "six"}})", "config.json: model.n_layers is not an integer"}},
      {"steps", {R"({"train": {"steps": 1.5}})", "config.json: train.steps is not an integer"}},
      {"placement", {R"({"model": {"placement": 5}})", "config.json: model.placement is not a string"}}};
  for (const auto& [id, text] : cases) {
    fake_run(tmp / id, {7.0});
    spit(tmp / id / "config.json", text.first);
  }
  std::map<std::string, Json> runs = served_runs(tmp.path());
  for (const auto& [id, text] : cases) expect_unreadable(runs, id, text.second);
}

TEST(ServeUnreadable, AMalformedSummaryJson) {
  TempDir tmp("serve");
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"torn", {R"({"train_loss": 6.)", "summary.json is not valid JSON"}},
      {"list", {R"([6.1])", "summary.json holds no JSON object"}},
      {"val",
       {Json{{normlab::train::field::val_loss, "low"}}.dump(),
        fmt::format("summary.json: {} is not a number", normlab::train::field::val_loss)}},
      {"unigram", {R"({"train_loss": 6.1, "unigram_entropy_nats": "6"})", "unigram_entropy_nats is not a number"}}};
  for (const auto& [id, text] : cases) {
    fake_run(tmp / id, {7.0});
    spit(tmp / id / "summary.json", text.first);
  }
  // In a study the training's summary lies in run/: the message says so.
  const fs::path slot = study_run(tmp / "study", "a", "train", true);
  train_study_run(slot, true);
  spit(slot / "run" / "summary.json", "{");
  end_study_run(slot, "finished");
  std::map<std::string, Json> runs = served_runs(tmp.path());
  for (const auto& [id, text] : cases) expect_unreadable(runs, id, text.second);
  expect_unreadable(runs, "study/runs/a", "run/summary.json is not valid JSON");
}

TEST(ServeUnreadable, AMalformedMetricsLine) {
  TempDir tmp("serve");
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"text", {"garbage\n", "metrics.jsonl line 3: not a JSON object"}},
      {"step",
       {R"({"type":"train","step":"x","loss":5.0})"
        "\n",
        "metrics.jsonl line 3: step is not an integer"}},
      {"loss",
       {R"({"type":"train","step":3,"loss":"5.0"})"
        "\n",
        "metrics.jsonl line 3: loss is not a number"}},
      {"eval",
       {Json{{"type", "eval"}, {"step", 3}, {normlab::train::field::val_loss, {5}}}.dump() + "\n",
        fmt::format("line 3: {} is not a number", normlab::train::field::val_loss)}},
      {"type",
       {R"({"type":7,"step":3})"
        "\n",
        "metrics.jsonl line 3: type is not a string"}}};
  for (const auto& [id, line] : cases) fake_run(tmp / id, {7.0, 6.5}, line.first);
  std::map<std::string, Json> runs = served_runs(tmp.path());
  for (const auto& [id, line] : cases) {
    expect_unreadable(runs, id, line.second);
    EXPECT_GE(runs[id]["step"], 2) << "what can be read is still shown";
  }
}

// A FIFO where a run's file should be: opening it would block the server for ever.
TEST(ServeUnreadable, AFifoForARunsFile) {
  TempDir tmp("serve");
  for (const char* name : {"config.json", "summary.json", "metrics.jsonl"}) {
    fake_run(tmp / name, {7.0});
    fs::remove(tmp / name / name);
    ASSERT_EQ(mkfifo((tmp / name / name).c_str(), 0644), 0);
  }
  std::map<std::string, Json> runs = served_runs(tmp.path());
  expect_unreadable(runs, "summary.json", "summary.json is not a regular file");
  expect_unreadable(runs, "metrics.jsonl", "metrics.jsonl is not a regular file");
  EXPECT_FALSE(runs.contains("config.json")) << "without a config.json a folder is no run";
}

// summary.json says a run reached its last step. Cut short at any byte it is no JSON; cut at a field (JSON again,
// but without the fields the trainer writes last) it once showed the run as finished.
TEST(ServeUnreadable, ASummaryJsonCutShort) {
  TempDir tmp("serve");
  const std::string whole = summary_text(6.0, 6.1);
  for (size_t cut = 0; cut + 1 < whole.size(); ++cut) {  // the last byte is the '\n' after the object
    fake_run(tmp / fmt::format("cut-{}", cut), {7.0, 6.0});
    spit(tmp / fmt::format("cut-{}", cut) / "summary.json", whole.substr(0, cut));
  }
  Json fields = Json::parse(whole);
  std::vector<std::string> keys;
  for (auto field = fields.begin(); field != fields.end(); ++field) keys.push_back(field.key());
  for (size_t n = keys.size(); n-- > 0;) {  // the fields the trainer writes last go first
    fields.erase(keys[n]);
    fake_run(tmp / ("without-" + keys[n]), {7.0, 6.0});
    spit(tmp / ("without-" + keys[n]) / "summary.json", fields.dump(2));
  }
  fake_run(tmp / "whole", {7.0, 6.0});
  spit(tmp / "whole" / "summary.json", whole);
  std::map<std::string, Json> runs = by_path(RunIndex(fs::canonical(tmp.path())).scan()["runs"]);
  for (size_t cut = 0; cut + 1 < whole.size(); ++cut)
    expect_unreadable(runs, fmt::format("cut-{}", cut), "summary.json");
  for (const std::string& key : keys) expect_unreadable(runs, "without-" + key, "summary.json lacks ");
  EXPECT_NE(runs["without-precision"]["message"].get<std::string>().find("summary.json lacks precision"),
            std::string::npos)
      << runs["without-precision"];
  EXPECT_EQ(runs["whole"]["status"], "finished") << runs["whole"];
}

// The glibc heap in use, in bytes.
size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// A 200 MB metrics.jsonl once left the server holding about 600 MB: the file was read whole, split into lines and
// its losses kept. It is read as a stream now, and what the index keeps of it does not grow with its length. The
// file here is 100 000 steps (10 MB), whose losses alone would hold 1.6 MB; each step's loss is flat, so a run
// whose summary is written reads as stalled, by the rule that needs every logged loss while it is read.
TEST(ServeIndex, KeepsAFewNumbersOfAMetricsFileHoweverLong) {
  TempDir tmp("serve");
  constexpr int kSteps = 100000;
  {
    fake_run(tmp / "long", {});
    std::string metrics;
    for (int step = 1; step <= kSteps; ++step)
      metrics +=
          fmt::format(R"({{"type":"train","step":{},"loss":6.5,"lr":0.001,"grad_norm":1.0,"tokens_per_s":1000.0}})"
                      "\n",
                      step);
    spit(tmp / "long" / "metrics.jsonl", metrics);
    write_summary(tmp / "long", 6.5, 6.6);
  }
  RunIndex index(fs::canonical(tmp.path()));
  const size_t before = heap_in_use();
  {
    const Json run = index.scan()["runs"][0];
    EXPECT_EQ(run["status"], "stalled") << run;
    EXPECT_EQ(run["step"], kSteps);
    EXPECT_EQ(run["loss"], 6.5);
  }
  const size_t kept = heap_in_use() - std::min(before, heap_in_use());
  EXPECT_LT(kept, 64u << 10) << "the index keeps " << kept << " bytes after reading a metrics.jsonl of " << kSteps
                             << " steps";
}

// The index reads a path only where /files/ would serve it: a symlink out of the served folder is refused alike
// (its run unreadable, nothing of the file shown, or a folder not listed), one that stays inside is read.
TEST(ServeIndex, ResolvesSymlinksAsFilesDoes) {
  TempDir tmp("serve");
  const fs::path root = tmp / "root", outside = tmp / "outside";
  fake_run(outside / "run", {7.0, 6.0, 5.0});
  train_study_run(study_run(outside, "train-pre-L6-s9", "train", true), true);
  fake_run(root / "own", {7.0});  // its metrics.jsonl leads out: the outside run's 3 steps
  fs::remove(root / "own" / "metrics.jsonl");
  fs::create_symlink(outside / "run" / "metrics.jsonl", root / "own" / "metrics.jsonl");
  fake_run(root / "target", {7.0, 6.0});
  fake_run(root / "alias", {7.0});  // its metrics.jsonl leads to another run's inside the folder
  fs::remove(root / "alias" / "metrics.jsonl");
  fs::create_symlink(root / "target" / "metrics.jsonl", root / "alias" / "metrics.jsonl");
  const fs::path slot = study_run(root / "study", "train-pre-L6-s1", "train", true);  // its training leads out
  fs::create_symlink(outside / "runs" / "train-pre-L6-s9" / "run", slot / "run");
  fs::create_symlink(outside / "runs" / "train-pre-L6-s9", root / "study" / "runs" / "train-pre-L6-s9");
  fs::create_symlink(outside / "run", root / "linked");
  std::map<std::string, Json> runs = served_runs(root);

  expect_unreadable(runs, "own", "metrics.jsonl is a symlink that leads out of the served folder");
  EXPECT_EQ(runs["own"]["step"], 0) << "nothing of the file outside is shown";
  EXPECT_TRUE(runs["own"]["loss"].is_null());
  expect_unreadable(runs, "study/runs/train-pre-L6-s1", "run/ is a symlink that leads out of the served folder");
  EXPECT_EQ(runs["study/runs/train-pre-L6-s1"]["step"], 0);
  EXPECT_FALSE(runs.contains("study/runs/train-pre-L6-s9")) << "a study run's folder that leads out";
  EXPECT_FALSE(runs.contains("linked")) << "a run folder that leads out";
  EXPECT_EQ(runs["alias"]["step"], 2) << "a symlink inside the folder is read, as /files/ serves it";
  EXPECT_EQ(runs["alias"]["status"], "running") << runs["alias"];
  const Json index = RunIndex(fs::canonical(root)).scan();
  ASSERT_EQ(index["studies"].size(), 1u);
  EXPECT_EQ(index["studies"][0]["runs"], 1) << "a study run's folder that leads out is not counted";

  LiveServer server(root);
  for (const char* path : {"own/metrics.jsonl", "study/runs/train-pre-L6-s1/run/metrics.jsonl",
                           "study/runs/train-pre-L6-s9/request.json", "linked/config.json"})
    EXPECT_EQ(status_of(get(server.port(), std::string("/files/") + path)), 403) << path;
  EXPECT_EQ(status_of(get(server.port(), "/files/alias/metrics.jsonl")), 200);
}

// A study's runs are grouped by arm, the runs that differ only in their seed: each arm with its runs, those that
// ended, and the mean of their final losses.
TEST(ServeIndex, GroupsAStudysRunsByArm) {
  TempDir tmp("serve");
  const fs::path study = finished_study(tmp / "study", std::chrono::hours(1));
  const fs::path second = study_run(study, "train-pre-L6-w0-s2", "train", true);
  fake_run(second / "run", {8.0, 7.0});
  write_summary(second / "run", 7.0, 6.9);
  end_study_run(second, "finished");
  fake_run(tmp / "own", {7.0});
  const Json index = RunIndex(fs::canonical(tmp.path())).scan();
  std::map<std::string, Json> runs = by_path(index["runs"]);
  EXPECT_EQ(runs["study/runs/train-pre-L6-w0-s2"]["arm"], "train-pre-L6-w0");
  EXPECT_EQ(runs["study/runs/init-pre-L2-s1"]["arm"], "init-pre-L2");
  EXPECT_TRUE(runs["own"]["arm"].is_null());
  ASSERT_EQ(index["studies"].size(), 1u);
  std::map<std::string, Json> arms;
  for (const Json& a : index["studies"][0]["arms"]) arms[a["arm"].get<std::string>()] = a;
  ASSERT_EQ(arms.size(), 4u) << index["studies"][0].dump(2);
  const Json& pre = arms["train-pre-L6-w0"];
  EXPECT_EQ(pre["runs"], 2);
  EXPECT_EQ(pre["ended"], 2);
  EXPECT_NEAR(pre["loss"].get<double>(), (7.30 + 7.0) / 2, 1e-9);
  EXPECT_NEAR(pre[normlab::train::field::val_loss].get<double>(), (7.29 + 6.9) / 2, 1e-9);
  EXPECT_EQ(arms["train-post-L6-w0"]["ended"], 1);
  EXPECT_EQ(arms["xavier-post-L6-w10"]["ended"], 0) << "a diverged run has no final loss";
  EXPECT_TRUE(arms["xavier-post-L6-w10"]["loss"].is_null());
  EXPECT_TRUE(arms["init-pre-L2"]["loss"].is_null()) << "an analysis-only arm has none";
}

}  // namespace
}  // namespace normlab::serve
