#pragma once
// What the serve tests share: a server on a free port, raw HTTP requests, and run and study folders
// written in the formats the trainer and the study runner leave behind (the files of
// `normlab study why-pre-ln --quick --set train.steps=20`).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include "serve/server.h"
#include "train/records.h"
#include "train/tiny_corpus.h"

namespace normlab::serve::testing {

namespace fs = std::filesystem;
using train::testing::slurp;
using train::testing::spit;

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

// A TCP connection to 127.0.0.1:port (the server may listen a moment after its thread starts: retried briefly);
// -1 if none.
inline int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int attempt = 0; connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0; ++attempt) {
    if (attempt == 50) return close(fd), -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fd;
}

// Sends raw bytes to 127.0.0.1:port and returns everything the server answers until it closes, or to the end of
// the answer's body; a read waits at most `timeout`.
inline std::string raw_request(int port, const std::string& bytes,
                               std::chrono::seconds timeout = std::chrono::seconds(30)) {
  const int fd = connect_to(port);
  if (fd < 0) return "no connection";
  timeval t{static_cast<time_t>(timeout.count()), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  static const std::regex length(R"(\r\ncontent-length: *(\d+)\r\n)", std::regex::icase);
  std::string out;
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

// GET `target` with `headers` (each ending in \r\n) and the right Host.
inline std::string get(int port, const std::string& target, const std::string& headers = "") {
  return raw_request(port, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" + headers +
                               "Connection: close\r\n\r\n");
}

inline int status_of(const std::string& response) {
  return response.starts_with("HTTP/1.") && response.size() > 12 ? std::stoi(response.substr(9, 3)) : -1;
}

inline std::string body_of(const std::string& response) {
  const size_t head = response.find("\r\n\r\n");
  return head == std::string::npos ? "" : response.substr(head + 4);
}

inline std::string header_of(const std::string& response, const std::string& name) {
  std::smatch m;
  const std::string head = response.substr(0, response.find("\r\n\r\n") + 2);
  return std::regex_search(head, m, std::regex("\r\n" + name + ": *([^\r]*)\r\n", std::regex::icase)) ? m[1].str() : "";
}

// A training run's folder with the files the trainer writes first (config.json, metrics.jsonl; `tail` is
// appended to metrics.jsonl as it is).
inline void fake_run(const fs::path& dir, const std::vector<double>& losses, const std::string& tail = "",
                     const std::string& placement = "pre") {
  fs::create_directories(dir);
  spit(dir / "config.json",
       Json{{"model", {{"placement", placement}, {"n_layers", 2}}},
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

// The trainer's summary.json at the end of a run, written as the trainer writes it (RunSummary::to_json).
inline std::string summary_text(double train_loss, double val_loss, double unigram_entropy_nats = 5.95) {
  return train::RunSummary{.steps = 20,
                           .train_loss = train_loss,
                           .val_loss = val_loss,
                           .val_accuracy = 0.12,
                           .unigram_entropy_nats = unigram_entropy_nats,
                           .seconds = 94.5,
                           .tokens_per_s = 221.8,
                           .parameters = 566272,
                           .precision = "fp32"}
             .to_json()
             .dump(2) +
         "\n";
}
inline void write_summary(const fs::path& dir, double train_loss, double val_loss) {
  spit(dir / "summary.json", summary_text(train_loss, val_loss));
}

// A study's run folder <study>/runs/<id>/ as the runner writes it for every run of its plan before the first
// starts: request.json (kind train, or probe for an analysis-only run) and config.json; `started` adds the
// log.txt its process writes.
inline fs::path study_run(const fs::path& study, const std::string& id, const std::string& kind, bool started,
                          const std::string& placement = "pre") {
  const fs::path dir = study / "runs" / id;
  fs::create_directories(dir);
  const Json config{{"model", {{"placement", placement}, {"n_layers", 6}}},
                    {"train", {{"steps", 20}, {"batch_size", 4}, {"seq_len", 16}, {"grad_accum", 1}}}};
  spit(dir / "config.json", config.dump(2) + "\n");
  spit(dir / "request.json", Json{{"kind", kind},
                                  {"analyses", kind == "probe" ? "grad-init" : ""},
                                  {"probe_flags", Json::array()},
                                  {"corpus", "c7bc2a8fd9e14825"},
                                  {"config", config}}
                                     .dump(2) +
                                 "\n");
  if (started) spit(dir / "log.txt", "566272 parameters\nstep      2/20 | loss 8.2513 | lr 1.00e-03\n");
  return dir;
}

// The runner's status.json, written when the run's process ended.
inline void end_study_run(const fs::path& dir, const std::string& status, const std::string& message = "") {
  spit(dir / "status.json",
       Json{{"status", status}, {"message", message}, {"seconds", 33.4}, {"normlab", "a464d50"}}.dump() + "\n");
}

// A study run's training: 20 steps logged every 2 in run/, and its summary when `finished`.
inline void train_study_run(const fs::path& dir, bool finished) {
  std::vector<double> losses;
  for (int i = 0; i < 20; ++i) losses.push_back(8.25 - 0.05 * i);
  fake_run(dir / "run", losses);
  spit(dir / "run" / "config.json", slurp(dir / "config.json"));
  if (finished) write_summary(dir / "run", losses.back(), losses.back() - 0.01);
}

// `normlab probe --analysis grad-init`'s analysis.jsonl: one record, columns as arrays.
inline void write_grad_init(const fs::path& dir) {
  spit(
      dir / "analysis.jsonl",
      Json{
          {"analysis", "grad-init"},
          {"result",
           {{"name", {"embed.tokens.weight", "layers.0.attn.q.weight", "layers.0.ffn.fc1.weight", "final_norm.weight"}},
            {"grad_norm", {0.638, 0.0878, 0.2805, 0.0412}}}}}
              .dump() +
          "\n");
}

// Sets the time of every file and folder under `dir` back by `age`, as if written that long ago.
inline void age_files(const fs::path& dir, std::chrono::seconds age) {
  const auto then = fs::file_time_type::clock::now() - age;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) fs::last_write_time(e.path(), then);
}

// A study as `normlab study why-pre-ln --quick` leaves it when it ended: two trainings, an analysis-only run
// (`normlab probe` on a fresh init), a run that diverged, and the report. Its files are `age` old.
inline fs::path finished_study(const fs::path& dir, std::chrono::seconds age) {
  for (const char* id : {"train-pre-L6-w0-s1", "train-post-L6-w0-s1"}) {
    const fs::path run = study_run(dir, id, "train", true, id == std::string("train-pre-L6-w0-s1") ? "pre" : "post");
    train_study_run(run, true);
    end_study_run(run, "finished");
  }
  const fs::path init = study_run(dir, "init-pre-L2-s1", "probe", true);
  write_grad_init(init);
  end_study_run(init, "finished");
  const fs::path diverged = study_run(dir, "xavier-post-L6-w10-s1", "train", true, "post");
  fake_run(diverged / "run", {8.2, 9.5},
           Json{{"type", "non_finite"}, {"step", 3}, {"loss", nullptr}, {"first", "layers.5.ffn.fc2"}}.dump() + "\n");
  end_study_run(diverged, "diverged", "normlab: error: non-finite values at step 3");
  spit(dir / "report.md", "# Why Pre-LN won\n\n## Verdict: inconclusive\n");
  spit(dir / "report.html", "<html></html>");
  spit(dir / "summary.csv", "id,kind,status\n");
  age_files(dir, age);
  return dir;
}

}  // namespace normlab::serve::testing
