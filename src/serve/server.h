#pragma once
// `normlab serve`: a local, read-only web view of a folder of runs and studies while they train.
//
// Routes (GET only; other methods get 405):
//   /                  the index of runs and studies          /api/index   its data (RunIndex::scan)
//   /run?path=P        a run's live page                       /api/run?path=P   one run's index entry
//   /compare?runs=A&runs=B   loss curves overlaid
//   /api/tail?path=F&offset=N   the complete lines of a .jsonl file from byte N, parsed, and the next offset
//   /files/P           any file under the folder (directories list their entries)
//   /chart.js          Debian's Chart.js
// Safety: binds 127.0.0.1 unless told otherwise; on a loopback address it also refuses requests whose
// Host header names another host (a web page cannot reach it through DNS rebinding); every path goes
// through resolve_under (safe_path.h).
#include <filesystem>
#include <memory>
#include <string>

namespace normlab::serve {

struct ServeOptions {
  std::filesystem::path dir = "runs";
  std::string host = "127.0.0.1";
  int port = 8787;  // 0: any free port
};

class Server {
 public:
  // Checks the folder and Chart.js and binds the port; throws normlab::Error naming the fix.
  explicit Server(const ServeOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  std::string url() const;  // http://host:port/
  void run();               // serves until stop() (from another thread)
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace normlab::serve
