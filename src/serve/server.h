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
// through resolve_under (safe_path.h). Slow clients: each request must arrive whole within
// kRequestSeconds (an idle kept-alive connection is closed after as long), and kServeThreads threads
// answer, so a few slow or idle clients leave the others served at once and many delay them at most
// that long.
#include <filesystem>
#include <memory>
#include <string>

namespace normlab::serve {

inline constexpr int kRequestSeconds = 5;       // to send a whole request (line and headers), or to start the next
inline constexpr int kServeThreads = 32;        // connections answered at once
inline constexpr int kKeepAliveRequests = 100;  // requests on one connection before the server closes it

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
