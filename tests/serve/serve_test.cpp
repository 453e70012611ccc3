// normlab serve: path safety (unit and raw-socket requests, which must get 4xx and never a byte from
// outside the folder), files being written (partial last lines, truncation), the run classes of the
// index, the CLI's messages, and the pages in a real browser while a real training runs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <regex>
#include <thread>

#include "browser.h"
#include "serve/run_index.h"
#include "serve/safe_path.h"
#include "serve/server.h"
#include "serve_helpers.h"
#include "train/records.h"
#include "train/tiny_corpus.h"

namespace normlab::serve {
namespace {

using normlab::testing::body_attribute;
using normlab::testing::render_in_chromium;
using testing::fake_run;
using testing::finished_study;
using testing::get;
using testing::LiveServer;
using testing::raw_request;
using testing::status_of;
using testing::study_run;
using train::testing::run_cli;
using train::testing::slurp;
using train::testing::spit;
using train::testing::TempDir;
using train::testing::tiny_config_doc;
namespace fs = std::filesystem;

constexpr const char* kSecret = "TOP-SECRET-OUTSIDE-THE-FOLDER";

TEST(ServePaths, RefusesEverythingThatLeavesTheFolder) {
  TempDir tmp("serve");
  const fs::path root = tmp / "root";
  fs::create_directories(root / "run");
  fs::create_directories(tmp / "root2");  // a sibling whose name extends the root's
  spit(root / "run" / "a.txt", "a");
  spit(tmp / "root2" / "secret.txt", kSecret);
  fs::create_symlink(tmp / "root2", root / "out");                  // a directory symlink out
  fs::create_symlink(tmp / "root2" / "secret.txt", root / "leak");  // a file symlink out
  fs::create_symlink(root / "run" / "a.txt", root / "alias");       // a symlink that stays inside
  const fs::path r = fs::canonical(root);
  EXPECT_EQ(resolve_under(r, "run/a.txt").status, 200);
  EXPECT_EQ(resolve_under(r, "run/a.txt").path, r / "run" / "a.txt");
  EXPECT_EQ(resolve_under(r, "").status, 200);
  EXPECT_EQ(resolve_under(r, "alias").status, 200);
  EXPECT_EQ(resolve_under(r, "run/missing").status, 404);
  for (const char* bad :
       {"..", "../root2/secret.txt", "run/../../root2/secret.txt", "run/..", "/etc/passwd", "run\\..\\x"})
    EXPECT_EQ(resolve_under(r, bad).status, 400) << bad;
  EXPECT_EQ(resolve_under(r, std::string("run/a.txt\0.png", 14)).status, 400);
  EXPECT_EQ(resolve_under(r, "out/secret.txt").status, 403);
  EXPECT_EQ(resolve_under(r, "leak").status, 403);
}

TEST(ServeTail, ReadsCompleteLinesAndNoticesTruncation) {
  TempDir tmp("serve");
  const fs::path f = tmp / "m.jsonl";
  EXPECT_TRUE(read_tail(f, 0, 100).lines.empty()) << "a missing file reads as empty";
  spit(f, "{\"a\":1}\n{\"b\":2}\n{\"c\":");  // the writer is in the middle of its third line
  Tail t = read_tail(f, 0, 100);
  EXPECT_EQ(t.lines, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"}));
  EXPECT_EQ(t.next, 16u);
  EXPECT_FALSE(t.reset);
  EXPECT_TRUE(read_tail(f, t.next, 100).lines.empty());
  spit(f, "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
  t = read_tail(f, t.next, 100);
  EXPECT_EQ(t.lines, std::vector<std::string>{"{\"c\":3}"});
  // Chunks stop at a line end; `more` asks for the rest.
  t = read_tail(f, 0, 10);
  EXPECT_EQ(t.lines.size(), 1u);
  EXPECT_TRUE(t.more);
  // A resumed run cuts the file back: the reader starts over.
  spit(f, "{\"a\":1}\n");
  t = read_tail(f, 24, 100);
  EXPECT_TRUE(t.reset);
  EXPECT_EQ(t.lines, std::vector<std::string>{"{\"a\":1}"});
}

TEST(ServeIndex, ClassifiesRunsAndStudies) {
  TempDir tmp("serve");
  const fs::path root = tmp.path();
  std::vector<double> falling, flat;
  for (int i = 0; i < 40; ++i) falling.push_back(6.0 - 0.1 * i), flat.push_back(i < 4 ? 7.0 - 0.3 * i : 5.9);
  const std::string summary = testing::summary_text(5.0, 4.0, 6.0);
  fake_run(root / "done", falling);
  spit(root / "done" / "summary.json", summary);
  fake_run(root / "flat", flat);  // ends above the unigram entropy − 0.25 on a plateau
  spit(root / "flat" / "summary.json", summary);
  fake_run(root / "nan", {6.0}, Json{{"type", "non_finite"}, {"step", 2}, {"first", "layer1.attn.out"}}.dump() + "\n");
  fake_run(root / "live", {6.0, 5.5}, "{\"type\":\"train\",\"step\":3,\"lo");  // being written: a partial last line
  fake_run(root / "killed", {6.0});
  for (const char* f : {"config.json", "metrics.jsonl"})
    fs::last_write_time(root / "killed" / f, fs::file_time_type::clock::now() - std::chrono::hours(1));
  // A study: its report's verdict, one slot finished and one failed (the runner's status.json).
  const fs::path study = root / "study";
  fake_run(study / "runs" / "a" / "run", falling);
  spit(study / "runs" / "a" / "run" / "summary.json", summary);
  fake_run(study / "runs" / "b" / "run", {6.0});
  for (const char* slot : {"a", "b"}) spit(study / "runs" / slot / "request.json", "{}");
  spit(study / "runs" / "a" / "status.json", R"({"status": "finished"})");
  spit(study / "runs" / "b" / "status.json", R"({"status": "failed", "message": "out of memory"})");
  spit(study / "report.md", "# t\n\n## Verdict: not reproduced\n");
  spit(study / "report.html", "<html></html>");

  const Json index = RunIndex(fs::canonical(root)).scan();
  std::map<std::string, Json> runs;
  for (const Json& r : index["runs"]) runs[r["path"].get<std::string>()] = r;
  ASSERT_EQ(runs.size(), 7u) << index.dump(2);
  EXPECT_EQ(runs["done"]["status"], "finished");
  EXPECT_EQ(runs["done"]["step"], 40);
  EXPECT_EQ(runs["done"][normlab::train::field::val_loss], 4.0);
  EXPECT_EQ(runs["done"]["placement"], "pre");
  EXPECT_EQ(runs["flat"]["status"], "stalled");
  EXPECT_EQ(runs["nan"]["status"], "diverged");
  EXPECT_NE(runs["nan"]["message"].get<std::string>().find("layer1.attn.out"), std::string::npos);
  EXPECT_EQ(runs["live"]["status"], "running");
  EXPECT_EQ(runs["live"]["step"], 2) << "the partial line is not read";
  EXPECT_EQ(runs["killed"]["status"], "stopped");
  EXPECT_EQ(runs["study/runs/a"]["status"], "finished");
  EXPECT_EQ(runs["study/runs/a"]["study"], "study");
  EXPECT_EQ(runs["study/runs/b"]["status"], "failed");
  EXPECT_EQ(runs["study/runs/b"]["message"], "out of memory");
  EXPECT_TRUE(runs["done"]["study"].is_null());
  ASSERT_EQ(index["studies"].size(), 1u);
  const Json& s = index["studies"][0];
  EXPECT_EQ(s["path"], "study");
  EXPECT_EQ(s["verdict"], "not reproduced");
  EXPECT_EQ(s["status"], "finished");
  EXPECT_EQ(s["runs"], 2);
  EXPECT_EQ(s["done"], 2);
  EXPECT_EQ(s["report"], "study/report.html");
}

TEST(ServeHttp, AnswersTraversalAndMalformedRequestsWith4xx) {
  TempDir tmp("serve");
  const fs::path root = tmp / "runs";
  fake_run(root / "pre", {6.0, 5.0});
  spit(tmp / "secret.txt", kSecret);
  spit(tmp / "secret.jsonl", std::string("{\"s\":\"") + kSecret + "\"}\n");
  fs::create_symlink(tmp / "secret.txt", root / "leak.txt");
  fs::create_symlink(tmp.path(), root / "up");
  LiveServer server(root);
  const int port = server.port();

  // What is under the folder is served.
  std::string ok = get(port, "/files/pre/config.json");
  EXPECT_EQ(status_of(ok), 200) << ok;
  EXPECT_NE(ok.find("\"placement\""), std::string::npos);
  EXPECT_EQ(status_of(get(port, "/files/pre")), 302) << "a folder without its slash is redirected";
  EXPECT_EQ(status_of(get(port, "/files/")), 200);
  EXPECT_EQ(status_of(get(port, "/run?path=pre")), 200);
  ok = get(port, "/api/tail?path=pre/metrics.jsonl&offset=0");
  EXPECT_EQ(status_of(ok), 200);
  EXPECT_NE(ok.find("\"records\":[{\"type\":\"train\""), std::string::npos) << ok;
  EXPECT_NE(get(port, "/api/tail?path=pre/probes.jsonl&offset=0").find("\"records\":[]"), std::string::npos)
      << "a file not written yet is empty";
  EXPECT_EQ(status_of(get(port, "/chart.js")), 200);

  const std::string long_path = "/files/" + std::string(20000, 'a');
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"GET /../../etc/passwd HTTP/1.1", ""},
      {"GET /files/../secret.txt HTTP/1.1", ""},
      {"GET /files/%2e%2e/secret.txt HTTP/1.1", ""},
      {"GET /files/%2E%2E%2Fsecret.txt HTTP/1.1", ""},
      {"GET /files/pre/..%2f..%2fsecret.txt HTTP/1.1", ""},
      {"GET /files//etc/passwd HTTP/1.1", ""},
      {"GET /files/%2Fetc%2Fpasswd HTTP/1.1", ""},
      {"GET /files/leak.txt HTTP/1.1", ""},
      {"GET /files/up/secret.txt HTTP/1.1", ""},
      {"GET /files/pre%00/config.json HTTP/1.1", ""},
      {"GET /files/..\\secret.txt HTTP/1.1", ""},
      {"GET /api/tail?path=../secret.jsonl&offset=0 HTTP/1.1", ""},
      {"GET /api/tail?path=up/secret.jsonl&offset=0 HTTP/1.1", ""},
      {"GET /api/tail?path=%2Ftmp%2Fx.jsonl&offset=0 HTTP/1.1", ""},
      {"GET /api/tail?path=pre/metrics.jsonl&offset=-1 HTTP/1.1", ""},
      {"GET /api/tail?path=pre/config.json&offset=0 HTTP/1.1", ""},
      {"GET /api/run?path=/etc HTTP/1.1", ""},
      {"GET /run?path=.. HTTP/1.1", ""},
      {"GET /run?path=up HTTP/1.1", ""},
      {"GET http://evil.example/etc/passwd HTTP/1.1", ""},
      {"GET " + long_path + " HTTP/1.1", ""},
      {"POST /files/pre/config.json HTTP/1.1", "Content-Length: 0\r\n"},
      {"DELETE /files/pre/config.json HTTP/1.1", ""},
      {"GARBAGE", ""},
      {"GET /files/pre/config.json", ""},  // no HTTP version
      {"GET  HTTP/1.1", ""},
  };
  for (const auto& [line, headers] : bad) {
    const std::string response = raw_request(
        port, line + "\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" + headers + "Connection: close\r\n\r\n");
    const int status = status_of(response);
    EXPECT_TRUE(status >= 400 && status < 500) << line.substr(0, 80) << " → " << response.substr(0, 200);
    EXPECT_EQ(response.find(kSecret), std::string::npos) << line;
    EXPECT_EQ(response.find("root:x:0"), std::string::npos) << line;
  }
  // A page elsewhere that resolves its own host name to 127.0.0.1 (DNS rebinding) is refused.
  const auto with_host = [&](const std::string& host) {
    return raw_request(port, "GET /api/index HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
  };
  EXPECT_EQ(status_of(with_host("evil.example:" + std::to_string(port))), 403);
  EXPECT_EQ(status_of(with_host("localhost:" + std::to_string(port))), 200);
}

// `normlab serve args...`, stopped by `timeout` after `seconds` if it is still serving (exit 124 then).
train::testing::CliResult serve_cli(const std::vector<std::string>& args, const fs::path& scratch, int seconds) {
  std::string command = fmt::format("timeout {} '{}' serve", seconds, NORMLAB_BINARY);
  for (const auto& a : args) command.append(" ").append(train::testing::shell_quote(a));
  command += fmt::format(" >'{}/serve.out' 2>'{}/serve.err' </dev/null", scratch.string(), scratch.string());
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(scratch / "serve.out"), slurp(scratch / "serve.err")};
}

TEST(ServeCli, PrintsItsUrlAndNamesTheFixForABusyPortOrAMissingFolder) {
  TempDir tmp("serve");
  const std::string runs = (tmp / "runs").string();
  fs::create_directories(runs);
  {
    LiveServer busy(runs);
    train::testing::expect_cli_error(serve_cli({runs, "--port", std::to_string(busy.port())}, tmp.path(), 10),
                                     {"cannot listen on 127.0.0.1:", "in use", "--port"});
  }
  train::testing::expect_cli_error(serve_cli({(tmp / "nope").string()}, tmp.path(), 10), {"nope", "is not a folder"});
  // It prints where it listens and keeps serving until stopped.
  const auto r = serve_cli({runs, "--port", "0"}, tmp.path(), 2);
  EXPECT_EQ(r.exit_code, 124) << train::testing::describe(r);
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(at http://127\.0\.0\.1:\d+/ )"))) << r.out;
}

// A `normlab train` in the background, killed (if still running) when the test ends.
class BackgroundTrain {
 public:
  BackgroundTrain(const fs::path& run, const fs::path& config, const fs::path& log) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1), dup2(fd, 2);
      setenv("OMP_NUM_THREADS", "1", 1);
      setpriority(PRIO_PROCESS, 0, 19);  // the browser, not the training, should get the cores first
      execl(NORMLAB_BINARY, NORMLAB_BINARY, "train", "--run", run.c_str(), "--config", config.c_str(), nullptr);
      _exit(127);
    }
  }
  ~BackgroundTrain() {
    if (running()) kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  bool running() {
    int status = 0;
    if (done_ || waitpid(pid_, &status, WNOHANG) == 0) return !done_;
    return !(done_ = true);
  }

 private:
  pid_t pid_ = -1;
  bool done_ = false;
};

void expect_clean_page(const std::string& body, const std::string& page) {
  ASSERT_FALSE(body.empty()) << page << ": no <body> in the rendered DOM";
  EXPECT_EQ(body_attribute(body, "errors"), "0") << page << " raised console errors: " << body;
  EXPECT_EQ(body_attribute(body, "charts"), body_attribute(body, "charts-drawn"))
      << page << ": a chart stayed empty: " << body;
}

// A numeric data- attribute (0 when absent).
int attribute_number(const std::string& body, const std::string& name) {
  const std::string value = body_attribute(body, name);
  return value.empty() ? 0 : std::stoi(value);
}

// Waits, for as long as a starved machine may need (10 minutes), until `done` holds while the training runs; false
// if the training ended or the time ran out first.
bool wait_while_training(BackgroundTrain& training, const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (!done()) {
    if (!training.running() || std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

size_t train_records(const fs::path& run) {
  size_t n = 0;
  for (const std::string& line : read_tail(run / "metrics.jsonl", 0, 1 << 30).lines)
    n += line.find("\"train\"") != std::string::npos;
  return n;
}

// A config that trains for longer than any test lasts (the test kills it), logging every 25 steps and probing
// every 50. Batches of 16 keep it at a few hundred steps a second. The live run page grows with every point
// logged (each refresh redraws them all): with a log every 5 steps, the points gathered while a loaded machine
// ran the test made headless chromium outlast 150 s on the page, three times in a row.
Json live_config() {
  Json live = tiny_config_doc(1000000);
  live["train"]["log_every"] = 25;
  live["train"]["probe_every"] = 50;
  live["train"]["threads"] = 1;
  live["train"]["eval_every"] = 250;
  live["train"]["batch_size"] = 16;
  return live;
}

// The acceptance test: a finished run and a run that is training right now; the index lists both,
// the live run's page gains loss points between two loads and draws its probe profiles, and the
// compare page overlays both runs; no page raises an error. Screenshots: build/test-artifacts/serve-*.png.
// Every wait is for an event (a probe record, more logged steps), however slowly a loaded machine trains.
TEST(ServeBrowser, IndexRunPageAndCompareWhileATrainingRuns) {
  TempDir tmp("serve");
  const fs::path root = tmp / "runs";
  Json finished = tiny_config_doc(100);
  finished["model"]["placement"] = "post";
  finished["train"]["eval_every"] = 50;
  finished["train"]["log_every"] = 5;
  spit(tmp / "post.json", finished.dump());
  const auto r =
      run_cli({"train", "--run", (root / "post").string(), "--config", (tmp / "post.json").string()}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  spit(tmp / "live.json", live_config().dump());
  BackgroundTrain training(root / "pre", tmp / "live.json", tmp / "live.log");
  ASSERT_TRUE(wait_while_training(
      training, [&] { return slurp(root / "pre" / "probes.jsonl").find("\"step\":50,") != std::string::npos; }))
      << "no probe record at step 50: " << slurp(tmp / "live.log");
  LiveServer server(root);

  const std::string index = render_in_chromium(server.url("/"), "serve-index");
  expect_clean_page(index, "index");
  EXPECT_EQ(body_attribute(index, "runs"), "2") << index;
  EXPECT_EQ(body_attribute(index, "run-statuses"), "finished running") << index;

  const std::string first = render_in_chromium(server.url("/run?path=pre"), "serve-run-first-load");
  const size_t seen = static_cast<size_t>(attribute_number(first, "points"));
  ASSERT_TRUE(wait_while_training(training, [&] { return train_records(root / "pre") > seen; }))
      << "the training logged no step after the first load";
  const std::string second = render_in_chromium(server.url("/run?path=pre"), "serve-run-second-load");
  for (const auto& [body, name] : {std::pair{first, "first load"}, std::pair{second, "second load"}}) {
    expect_clean_page(body, name);
    EXPECT_EQ(body_attribute(body, "status"), "running") << body;
    EXPECT_EQ(body_attribute(body, "charts"), "8") << "4 curves and 4 probe profiles: " << body;
    EXPECT_EQ(body_attribute(body, "png"), "1") << "a chart exports as PNG";
  }
  EXPECT_GT(attribute_number(first, "points"), 0) << first;
  EXPECT_GT(attribute_number(second, "points"), attribute_number(first, "points"))
      << "the loss chart gained no points between two loads while training";

  const std::string compare = render_in_chromium(server.url("/compare?runs=post&runs=pre"), "serve-compare");
  expect_clean_page(compare, "compare");
  EXPECT_EQ(body_attribute(compare, "series"), "2") << compare;
  EXPECT_EQ(body_attribute(compare, "charts"), "2") << compare;
}

// Studies, the live view's main use: a finished study (its trainings in run/ subfolders, an analysis-only run, a
// diverged run) and a study that runs now (one of its runs trains: the real trainer, writing the run/ subfolder
// as the runner has it do; another waits its turn). Each page shows what the files say.
TEST(ServeBrowser, AFinishedAndARunningStudy) {
  TempDir tmp("serve");
  const fs::path root = tmp / "runs";
  finished_study(root / "study-why-pre-ln", std::chrono::hours(1));
  const fs::path live = study_run(root / "study-live", "train-pre-L2-s1", "train", true);
  // A log every 100 steps: the page needs a few points, and the fewer it gathers the faster it loads.
  Json config = live_config();
  config["train"]["log_every"] = 100;
  spit(live / "config.json", config.dump(2) + "\n");
  study_run(root / "study-live", "xavier-post-L2-s1", "train", false, "post");
  BackgroundTrain training(live / "run", live / "config.json", live / "log.txt");
  ASSERT_TRUE(wait_while_training(training, [&] { return train_records(live / "run") > 0; }))
      << slurp(live / "log.txt");
  LiveServer server(root);

  const std::string index = render_in_chromium(server.url("/"), "serve-studies-index");
  expect_clean_page(index, "index");
  EXPECT_EQ(body_attribute(index, "studies"), "2") << index;
  EXPECT_EQ(body_attribute(index, "study-statuses"), "running finished") << index;
  // In path order: the live study's two runs, then the finished study's four.
  EXPECT_EQ(body_attribute(index, "run-statuses"), "running queued finished finished finished diverged") << index;

  const std::string running =
      render_in_chromium(server.url("/run?path=study-live/runs/train-pre-L2-s1"), "serve-study-live-run");
  expect_clean_page(running, "running study run");
  EXPECT_EQ(body_attribute(running, "status"), "running") << running;
  EXPECT_GT(attribute_number(running, "points"), 0) << running;
  EXPECT_TRUE(training.running()) << "the training ended while the page loaded; the test needs it live";

  const std::string trained =
      render_in_chromium(server.url("/run?path=study-why-pre-ln/runs/train-pre-L6-w0-s1"), "serve-study-run");
  expect_clean_page(trained, "finished study run");
  EXPECT_EQ(body_attribute(trained, "status"), "finished") << trained;
  EXPECT_EQ(body_attribute(trained, "points"), "20") << trained;
  EXPECT_EQ(body_attribute(trained, "charts"), "4") << trained;

  const std::string probed =
      render_in_chromium(server.url("/run?path=study-why-pre-ln/runs/init-pre-L2-s1"), "serve-study-analysis");
  expect_clean_page(probed, "analysis-only study run");
  EXPECT_EQ(body_attribute(probed, "status"), "finished") << probed;
  EXPECT_EQ(body_attribute(probed, "analyses"), "1") << "grad-init's gradient norms: " << probed;
}

// "lr:min:max" in a page's data-y-ranges: the y axis each chart drew.
std::pair<double, double> y_range(const std::string& body, const std::string& chart) {
  std::smatch m;
  const std::string ranges = body_attribute(body, "y-ranges");
  if (!std::regex_search(ranges, m, std::regex("(^| )" + chart + ":([^: ]+):([^: ]+)"))) return {NAN, NAN};
  return {std::stod(m[2].str()), std::stod(m[3].str())};
}

// A constant learning rate of 1e-3 was drawn as a flat line at 0 on an axis of −1…1.5 (Chart.js's range for a
// flat series): its axis now holds the value well inside it.
TEST(ServeBrowser, AConstantLearningRateIsDrawnAtItsValue) {
  TempDir tmp("serve");
  fake_run(tmp / "runs" / "constant", {8.0, 7.5, 7.2, 7.0});  // lr 1e-3 at every step
  testing::write_summary(tmp / "runs" / "constant", 7.0, 7.1);
  LiveServer server(tmp / "runs");
  const std::string page = render_in_chromium(server.url("/run?path=constant"), "serve-constant-lr");
  expect_clean_page(page, "run page");
  const auto [low, high] = y_range(page, "lr");
  EXPECT_LE(low, 1e-3) << page;
  EXPECT_GE(high, 1e-3) << page;
  EXPECT_LT(high - low, 1e-2) << "the axis is too wide to tell 1e-3 from 0: " << page;
}

// A deep folder path pushed the status and loss columns off screen: it wraps now, and the page is no wider than
// the window. A study's runs (56 once, listed flat) are grouped by arm, closed, each arm with its mean final loss.
TEST(ServeBrowser, TheIndexFitsTheWindowAndGroupsAStudysRunsByArm) {
  TempDir tmp("serve");
  const fs::path root = tmp / "runs";
  fs::path deep = root;
  for (int i = 0; i < 12; ++i) deep /= fmt::format("a-rather-long-folder-name-{:02}", i);
  fake_run(deep, {7.0, 6.5});
  const fs::path study = finished_study(root / "study-why-pre-ln", std::chrono::hours(1));
  const fs::path second = study_run(study, "train-pre-L6-w0-s2", "train", true);
  fake_run(second / "run", {8.0, 7.0});
  testing::write_summary(second / "run", 7.0, 6.9);
  testing::end_study_run(second, "finished");
  LiveServer server(root);
  const std::string index = render_in_chromium(server.url("/"), "serve-index-arms");
  expect_clean_page(index, "index");
  EXPECT_EQ(body_attribute(index, "overflow"), "0") << "the page is wider than the window: " << index;
  EXPECT_EQ(body_attribute(index, "runs"), "6") << index;
  EXPECT_EQ(body_attribute(index, "arms"), "4") << index;
  EXPECT_EQ(body_attribute(index, "shown-runs"), "1") << "only the run of its own; the study's are closed: " << index;
  // In the arms' order (init-pre-L2, train-post-L6-w0, train-pre-L6-w0, xavier-post-L6-w10): the analysis-only arm
  // and the diverged one have no final loss; train-pre-L6-w0's is the mean of its two seeds' (7.30 and 7.00).
  EXPECT_EQ(body_attribute(index, "arm-losses"), " 7.300 7.150 ") << index;
}

}  // namespace
}  // namespace normlab::serve
