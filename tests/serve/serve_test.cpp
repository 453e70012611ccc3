// normlab serve: path safety (unit and raw-socket requests, which must get 4xx and never a byte from
// outside the folder), files being written (partial last lines, truncation), the run classes of the
// index, the CLI's messages, and the pages in a real browser while a real training runs.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <regex>
#include <thread>

#include "browser.h"
#include "serve/run_index.h"
#include "serve/safe_path.h"
#include "serve/server.h"
#include "train/tiny_corpus.h"

namespace normlab::serve {
namespace {

using normlab::testing::body_attribute;
using normlab::testing::render_in_chromium;
using train::testing::run_cli;
using train::testing::slurp;
using train::testing::spit;
using train::testing::TempDir;
using train::testing::tiny_config_doc;
namespace fs = std::filesystem;

constexpr const char* kSecret = "TOP-SECRET-OUTSIDE-THE-FOLDER";

// A server on a free port of 127.0.0.1, serving from a thread of this process until destroyed.
class LiveServer {
 public:
  explicit LiveServer(const fs::path& dir)
      : server_(ServeOptions{.dir = dir, .port = 0}), thread_([this] { server_.run(); }) {}
  ~LiveServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return server_.port(); }
  std::string url(const std::string& path) const { return server_.url() + path.substr(1); }

 private:
  Server server_;
  std::thread thread_;
};

// Sends raw bytes to 127.0.0.1:port and returns everything the server answers until it closes.
std::string raw_request(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string out;
  // The server may listen a moment after the thread starts: retry the connection briefly.
  for (int attempt = 0; connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0; ++attempt) {
    if (attempt == 50) return close(fd), "no connection";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  // Read up to the end of the answer's body: after a malformed request the server keeps the connection
  // open until its read timeout instead of closing it.
  static const std::regex length(R"(\r\ncontent-length: *(\d+)\r\n)", std::regex::icase);
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof buffer, 0)) > 0;) {
    out.append(buffer, static_cast<size_t>(n));
    const size_t head = out.find("\r\n\r\n");
    std::smatch m;
    const std::string header = head == std::string::npos ? "" : out.substr(0, head + 2);
    if (std::regex_search(header, m, length) && out.size() >= head + 4 + std::stoul(m[1].str())) break;
  }
  close(fd);
  return out;
}

std::string get(int port, const std::string& target, const std::string& host = "") {
  const std::string h = host.empty() ? "127.0.0.1:" + std::to_string(port) : host;
  return raw_request(port, "GET " + target + " HTTP/1.1\r\nHost: " + h + "\r\nConnection: close\r\n\r\n");
}

int status_of(const std::string& response) {
  return response.starts_with("HTTP/1.") && response.size() > 12 ? std::stoi(response.substr(9, 3)) : -1;
}

// A finished tiny run directory with the files the trainer writes (config, metrics, summary).
void fake_run(const fs::path& dir, const std::vector<double>& losses, const std::string& tail = "") {
  fs::create_directories(dir);
  spit(dir / "config.json",
       Json{{"model", {{"placement", "pre"}, {"n_layers", 2}}},
            {"train", {{"steps", losses.size()}, {"batch_size", 4}, {"seq_len", 16}, {"grad_accum", 1}}}}
           .dump());
  std::string metrics;
  for (size_t i = 0; i < losses.size(); ++i)
    metrics += Json{{"type", "train"}, {"step", i + 1},    {"loss", losses[i]},
                    {"lr", 1e-3},      {"grad_norm", 1.0}, {"tokens_per_s", 1000.0}}
                   .dump() +
               "\n";
  spit(dir / "metrics.jsonl", metrics + tail);
}

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
  const std::string summary = Json{{"val_loss", 4.0}, {"unigram_entropy_nats", 6.0}}.dump();
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
  EXPECT_EQ(runs["done"]["val_loss"], 4.0);
  EXPECT_EQ(runs["done"]["placement"], "pre");
  EXPECT_EQ(runs["flat"]["status"], "stalled");
  EXPECT_EQ(runs["nan"]["status"], "diverged");
  EXPECT_NE(runs["nan"]["message"].get<std::string>().find("layer1.attn.out"), std::string::npos);
  EXPECT_EQ(runs["live"]["status"], "running");
  EXPECT_EQ(runs["live"]["step"], 2) << "the partial line is not read";
  EXPECT_EQ(runs["killed"]["status"], "stopped");
  EXPECT_EQ(runs["study/runs/a/run"]["status"], "finished");
  EXPECT_EQ(runs["study/runs/a/run"]["study"], "study");
  EXPECT_EQ(runs["study/runs/b/run"]["status"], "failed");
  EXPECT_EQ(runs["study/runs/b/run"]["message"], "out of memory");
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
  EXPECT_EQ(status_of(get(port, "/api/index", "evil.example:" + std::to_string(port))), 403);
  EXPECT_EQ(status_of(get(port, "/api/index", "localhost:" + std::to_string(port))), 200);
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

// The acceptance test: a finished run and a run that is training right now; the index lists both,
// the live run's page gains loss points between two loads and draws its probe profiles, and the
// compare page overlays both runs; no page raises an error. Screenshots: build/test-artifacts/serve-*.png.
TEST(ServeBrowser, IndexRunPageAndCompareWhileATrainingRuns) {
  TempDir tmp("serve");
  const fs::path root = tmp / "runs";
  Json finished = tiny_config_doc(300);
  finished["model"]["placement"] = "post";
  finished["train"]["eval_every"] = 50;
  finished["train"]["log_every"] = 5;
  spit(tmp / "post.json", finished.dump());
  const auto r =
      run_cli({"train", "--run", (root / "post").string(), "--config", (tmp / "post.json").string()}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Far more steps than the test lasts (it is killed at the end); a log every 5 steps and probes every 25.
  Json live = tiny_config_doc(1000000);
  live["train"]["log_every"] = 5;
  live["train"]["probe_every"] = 25;
  live["train"]["threads"] = 1;
  live["train"]["eval_every"] = 100;
  // Batches of 16 keep the run at a few hundred steps a second: at the tiny default (4) the faster engine logged
  // so many points between loads that headless chromium often outlasted its 120 s on the run page.
  live["train"]["batch_size"] = 16;
  spit(tmp / "live.json", live.dump());
  BackgroundTrain training(root / "pre", tmp / "live.json", tmp / "live.log");
  for (int i = 0; i < 200 && slurp(root / "pre" / "probes.jsonl").find("\"step\":25,") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(training.running()) << slurp(tmp / "live.log");
  LiveServer server(root);

  const std::string index = render_in_chromium(server.url("/"), "serve-index");
  expect_clean_page(index, "index");
  EXPECT_EQ(body_attribute(index, "runs"), "2") << index;
  const std::string index_dom =
      slurp(fs::path(NORMLAB_BINARY).parent_path() / "test-artifacts" / "serve-index.dom.html");
  EXPECT_NE(index_dom.find(">running<"), std::string::npos) << "the live run is shown as running";
  EXPECT_NE(index_dom.find(">finished<"), std::string::npos);

  const std::string first = render_in_chromium(server.url("/run?path=pre"), "serve-run-first-load");
  const std::string second = render_in_chromium(server.url("/run?path=pre"), "serve-run-second-load");
  ASSERT_TRUE(training.running()) << "the training ended before the second load; the test needs it live";
  for (const auto& [body, name] : {std::pair{first, "first load"}, std::pair{second, "second load"}}) {
    expect_clean_page(body, name);
    EXPECT_EQ(body_attribute(body, "status"), "running") << body;
    EXPECT_EQ(body_attribute(body, "charts"), "8") << "4 curves and 4 probe profiles: " << body;
    EXPECT_EQ(body_attribute(body, "png"), "1") << "a chart exports as PNG";
  }
  EXPECT_GT(std::stoi("0" + body_attribute(first, "points")), 0) << first;
  EXPECT_GT(std::stoi("0" + body_attribute(second, "points")), std::stoi("0" + body_attribute(first, "points")))
      << "the loss chart gained no points between two loads while training";

  const std::string compare = render_in_chromium(server.url("/compare?runs=post&runs=pre"), "serve-compare");
  expect_clean_page(compare, "compare");
  EXPECT_EQ(body_attribute(compare, "series"), "2") << compare;
  EXPECT_EQ(body_attribute(compare, "charts"), "2") << compare;
}

}  // namespace
}  // namespace normlab::serve
