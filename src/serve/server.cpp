#include "serve/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>

#include "common/error.h"
#include "io/web.h"
#include "serve/byte_range.h"
#include "serve/pages.h"
#include "serve/run_index.h"
#include "serve/safe_path.h"

namespace normlab::serve {

namespace fs = std::filesystem;
using io::html_escape;

namespace {

// A .jsonl poll returns at most this much: a long run's first load comes in a few requests.
constexpr size_t kTailChunkBytes = 4 << 20;

bool is_loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

std::string content_type(const fs::path& file) {
  static const std::map<std::string, std::string> types = {{".html", "text/html; charset=utf-8"},
                                                           {".md", "text/plain; charset=utf-8"},
                                                           {".txt", "text/plain; charset=utf-8"},
                                                           {".json", "application/json"},
                                                           {".jsonl", "text/plain; charset=utf-8"},
                                                           {".csv", "text/plain; charset=utf-8"},
                                                           {".png", "image/png"},
                                                           {".svg", "image/svg+xml"},
                                                           {".js", "text/javascript"}};
  const auto it = types.find(file.extension().string());
  return it == types.end() ? "application/octet-stream" : it->second;
}

// One path segment for a URL: unreserved characters as they are, the rest %XX.
std::string url_segment(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

void error(httplib::Response& res, int status, const std::string& why) {
  res.status = status;
  res.set_content(plain_page("error", fmt::format("<h1>{}</h1><p>{}</p>", status, html_escape(why))),
                  "text/html; charset=utf-8");
}

void json_reply(httplib::Response& res, const std::string& body) {
  res.set_header("Cache-Control", "no-store");
  res.set_content(body, "application/json");
}

using Clock = std::chrono::steady_clock;

// A connection's socket for httplib, with one deadline over the whole of each request's reading.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, std::chrono::milliseconds write_timeout) : sock_(sock), write_timeout_(write_timeout) {}

  void set_read_deadline(Clock::time_point deadline) { deadline_ = deadline; }
  // Whether a read found the deadline passed: the request was cut short, and the connection is closed after the
  // server's answer to it (a 400), whatever the client sends next.
  bool timed_out() const { return timed_out_; }
  // Waits for the first byte of the next request until the read deadline; false when it passed, the client left
  // or the server is stopping (then the wait ends within a tenth of a second).
  // A request that arrived before the deadline is read even when the server comes to it later (see ready()).
  bool wait_for_request(const std::atomic<socket_t>& server_socket) {
    while (server_socket != INVALID_SOCKET) {
      if (buffered() > 0) return true;
      pollfd p{sock_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(millis_left(deadline_), 0, 100)));
      if (ready < 0 && errno != EINTR) return false;
      if (ready > 0) return (p.revents & POLLIN) != 0;
      if (ready == 0 && Clock::now() >= deadline_) return false;
    }
    return false;
  }

  bool is_readable() const override { return buffered() > 0 || ready(POLLIN, deadline_); }
  bool is_writable() const override { return ready(POLLOUT, Clock::now() + write_timeout_); }
  ssize_t read(char* ptr, size_t size) override {
    if (buffered() == 0) {
      if (!ready(POLLIN, deadline_)) return timed_out_ = true, -1;
      const ssize_t n = ::recv(sock_, buffer_, sizeof buffer_, 0);
      if (n <= 0) return n;
      begin_ = 0, end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, buffered());
    std::copy_n(buffer_ + begin_, n, ptr);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return ::send(sock_, ptr, size, MSG_NOSIGNAL);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(getsockname, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  size_t buffered() const { return end_ - begin_; }
  static int64_t millis_left(Clock::time_point deadline) {
    return std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  }
  // Whether the socket is ready for `events` before `deadline`. Past it, what the client has sent already is still
  // read, without waiting for more: a connection that waited in the queue behind slow ones may have sent its whole
  // request in time, and a slow one's partial request ends in a 400 at once.
  bool ready(short events, Clock::time_point deadline) const {
    for (;;) {
      const int64_t left = std::max<int64_t>(millis_left(deadline), 0);
      pollfd p{sock_, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(left));
      if (n > 0) return (p.revents & events) != 0;
      if (n == 0 || errno != EINTR) return false;
    }
  }
  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t length = sizeof a;
    if (get(sock_, reinterpret_cast<sockaddr*>(&a), &length) != 0) return;
    char text[INET6_ADDRSTRLEN] = "";
    if (a.ss_family == AF_INET) {
      const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
      inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text), port = ntohs(v4.sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
      inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text), port = ntohs(v6.sin6_port);
    }
    ip = text;
  }

  socket_t sock_;
  std::chrono::milliseconds write_timeout_;
  Clock::time_point deadline_ = Clock::now();
  bool timed_out_ = false;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
};

// When the connection a worker thread answers was accepted. httplib queues each accepted connection as one task of
// its pool; StampedPool stamps the task when it is queued and sets this as the task starts.
thread_local Clock::time_point accepted_at;

class StampedPool final : public httplib::ThreadPool {
 public:
  using ThreadPool::ThreadPool;
  void enqueue(std::function<void()> fn) override {
    ThreadPool::enqueue([fn = std::move(fn), at = Clock::now()] {
      accepted_at = at;
      fn();
    });
  }
};

// httplib 0.11.4 (Debian 12) bounds each read of a request by its read timeout but not the request: a client that
// sends a header line every 2 s keeps its thread for ever, and eight such clients held every thread of its pool,
// so no one else was answered. Here a request must arrive whole within kRequestSeconds of the moment the server
// is ready for it (the connection's opening, or the previous answer on a kept-alive connection), and a connection
// idle that long is closed; a client that stops reading an answer is dropped after the write timeout. The pool
// has more threads than a few browsers open connections, so slow clients cannot starve the others even
// before their deadline. A first request's time counts from the connection's acceptance, not from the moment a
// thread takes it: with more slow clients than threads, the ones that waited in the queue are past their
// deadline when a thread frees, and are let go at once, so no one waits more than about kRequestSeconds (100 slow
// clients delayed a request by 13 s when each deadline counted from its thread).
class BoundedServer final : public httplib::Server {
 public:
  BoundedServer() {
    new_task_queue = [] { return new StampedPool(kServeThreads); };
    set_keep_alive_max_count(kKeepAliveRequests);
    set_keep_alive_timeout(kRequestSeconds);  // what the Keep-Alive header announces
  }

 private:
  // Replaces httplib's loop over a connection's requests (detail::process_server_socket), with DeadlineStream.
  bool process_and_close_socket(socket_t sock) override {
    DeadlineStream stream(sock, std::chrono::seconds(write_timeout_sec_));
    bool served = false;
    Clock::time_point since = accepted_at;
    for (size_t left = keep_alive_max_count_; left > 0; --left, since = Clock::now()) {
      stream.set_read_deadline(since + std::chrono::seconds(kRequestSeconds));
      if (!stream.wait_for_request(svr_sock_)) break;
      bool closed = false;
      served = process_request(stream, left == 1, closed, [](httplib::Request& req) {
        // Ranges are left to /files (single_byte_range): httplib would apply them to every answer, unchecked.
        req.ranges.clear();
      });
      if (!served || closed || stream.timed_out()) break;
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return served;
  }
};

}  // namespace

struct Server::Impl {
  ServeOptions options;
  fs::path root;  // canonical
  std::string chart_js;
  RunIndex index;
  BoundedServer http;
  int port = 0;

  Impl(const ServeOptions& o, fs::path canonical_root)
      : options(o), root(std::move(canonical_root)), chart_js(io::chart_js_source()), index(root) {}

  // A request's path or 400/403/404 with the reason.
  bool resolve(const std::string& relative, httplib::Response& res, fs::path& out) {
    const Resolved r = resolve_under(root, relative);
    if (r.status != 200) return error(res, r.status, r.reason), false;
    out = r.path;
    return true;
  }

  void routes();
  void guards();  // the socket options, the method and Host checks, error and exception pages
  void pages();   // the HTML pages and Chart.js
  void api();     // the JSON endpoints and /files
  void tail(const httplib::Request& req, httplib::Response& res);
  void files(const httplib::Request& req, httplib::Response& res);
  // 416, with the file's size as RFC 9110 asks.
  static void refuse_range(httplib::Response& res, uintmax_t size) {
    res.set_header("Content-Range", fmt::format("bytes */{}", size));
    error(res, 416, "only one byte range within the file is served");
  }
  void listing(const httplib::Request& req, httplib::Response& res, const std::string& relative, const fs::path& dir);
};

void Server::Impl::routes() {
  guards();
  pages();
  api();
}

void Server::Impl::guards() {
  http.set_default_headers({{"X-Content-Type-Options", "nosniff"}});
  // httplib's default also sets SO_REUSEPORT, with which a second server binds a port already in use
  // and the two share its requests; SO_REUSEADDR alone still allows a restart right after a stop.
  http.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Read-only, and on loopback only for pages of this origin (see server.h).
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      error(res, 405, "normlab serve is read-only: only GET and HEAD are answered");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (is_loopback(options.host) && req.has_header("Host")) {
      const std::string host = req.get_header_value("Host");
      if (host != fmt::format("127.0.0.1:{}", port) && host != fmt::format("localhost:{}", port) &&
          host != fmt::format("[::1]:{}", port)) {
        error(res, 403, "this server answers only requests addressed to 127.0.0.1 or localhost");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    // httplib refuses a Range header it cannot parse itself, before routing; the answer still says the file's size.
    std::error_code ec;
    const Resolved file = req.path.starts_with("/files/") ? resolve_under(root, req.path.substr(7)) : Resolved{404};
    if (res.status == 416 && file.status == 200 && fs::is_regular_file(file.path, ec))
      return refuse_range(res, fs::file_size(file.path, ec));
    error(res, res.status, res.status == 404 ? "no such page" : "bad request");
  });
  // The details go to the terminal only: they may hold absolute paths, which the pages never show.
  http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      std::cerr << fmt::format("normlab serve: {} {}: {}\n", req.method, req.path, e.what());
    }
    error(res, 500, "the server could not answer this request (its terminal shows why)");
  });
}

void Server::Impl::pages() {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(index_page(), "text/html; charset=utf-8");
  });
  http.Get("/compare", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(compare_page(), "text/html; charset=utf-8");
  });
  http.Get("/run", [this](const httplib::Request& req, httplib::Response& res) {
    fs::path dir;
    if (!resolve(req.get_param_value("path"), res, dir)) return;
    if (!RunIndex::is_run(dir)) return error(res, 404, "not a run directory (it has no config.json)");
    res.set_content(run_page(), "text/html; charset=utf-8");
  });
  http.Get("/chart.js", [this](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "max-age=3600");
    res.set_content(chart_js, "text/javascript");
  });
}

void Server::Impl::api() {
  http.Get("/api/index",
           [this](const httplib::Request&, httplib::Response& res) { json_reply(res, index.scan().dump()); });
  http.Get("/api/run", [this](const httplib::Request& req, httplib::Response& res) {
    fs::path dir;
    if (!resolve(req.get_param_value("path"), res, dir)) return;
    if (!RunIndex::is_run(dir)) return error(res, 404, "not a run directory (it has no config.json)");
    json_reply(res, index.run(dir).dump());
  });
  http.Get("/api/tail", [this](const httplib::Request& req, httplib::Response& res) { tail(req, res); });
  http.Get(R"(/files(/.*)?)", [this](const httplib::Request& req, httplib::Response& res) { files(req, res); });
}

void Server::Impl::tail(const httplib::Request& req, httplib::Response& res) {
  const std::string path = req.get_param_value("path"), offset_text = req.get_param_value("offset");
  if (!path.ends_with(".jsonl")) return error(res, 400, "path must name a .jsonl file");
  if (offset_text.empty() || offset_text.size() > 18 ||
      !std::all_of(offset_text.begin(), offset_text.end(), [](unsigned char c) { return std::isdigit(c); }))
    return error(res, 400, "offset must be a byte offset (digits)");
  // A file not written yet (probes.jsonl before the first probe step) reads as empty, inside a folder that exists.
  Resolved file = resolve_under(root, path);
  if (file.status == 404) {
    const Resolved dir = resolve_under(root, fs::path(path).parent_path().string());
    if (dir.status != 200) return error(res, dir.status, dir.reason);
    return json_reply(res, R"({"next":0,"reset":false,"more":false,"records":[]})");
  }
  if (file.status != 200) return error(res, file.status, file.reason);
  const Tail t = read_tail(file.path, std::stoull(offset_text), kTailChunkBytes);
  // The lines are JSON already: they are spliced in, not parsed and printed again; a corrupt one is left out.
  std::string body = fmt::format(R"({{"next":{},"reset":{},"more":{},"records":[)", t.next, t.reset, t.more);
  bool first = true;
  for (const std::string& line : t.lines) {
    if (!Json::accept(line)) continue;
    if (!first) body += ',';
    body += line;
    first = false;
  }
  json_reply(res, body + "]}");
}

void Server::Impl::files(const httplib::Request& req, httplib::Response& res) {
  const std::string relative = req.matches[1].str().empty() ? "" : req.matches[1].str().substr(1);
  fs::path target;
  if (!resolve(relative, res, target)) return;
  std::error_code ec;
  const fs::file_status type = fs::status(target, ec);
  if (fs::is_directory(type)) return listing(req, res, relative, target);
  // Only regular files: a FIFO would block the reader, a device never end.
  if (!fs::is_regular_file(type)) return error(res, 403, "not a regular file: only files and folders are served");
  const uintmax_t size = fs::file_size(target, ec);
  if (ec) return error(res, 403, "cannot read this file");
  // One range within the file (206), or none (200); anything else is refused (byte_range.h).
  ByteRange range{0, size};
  if (req.has_header("Range")) {
    const auto one = single_byte_range(req.get_header_value("Range"), size);
    if (!one) return refuse_range(res, size);
    range = *one;
    res.status = 206;
    res.set_header("Content-Range", fmt::format("bytes {}-{}/{}", range.offset, range.offset + range.length - 1, size));
  }
  res.set_header("Accept-Ranges", "bytes");
  // Streamed in pieces: a checkpoint can be large.
  auto in = std::make_shared<std::ifstream>(target, std::ios::binary);
  res.set_content_provider(range.length, content_type(target),
                           [in, start = range.offset](size_t offset, size_t length, httplib::DataSink& sink) {
                             std::string buffer(std::min<size_t>(length, 1 << 20), '\0');
                             in->seekg(static_cast<std::streamoff>(start + offset));
                             in->read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
                             if (in->gcount() <= 0) return false;  // the file shrank under us: end the response
                             return sink.write(buffer.data(), static_cast<size_t>(in->gcount()));
                           });
}

void Server::Impl::listing(const httplib::Request& req, httplib::Response& res, const std::string& relative,
                           const fs::path& dir) {
  // Relative links in the listing (and in a study's report.html) need the trailing slash.
  if (!req.path.ends_with('/')) return res.set_redirect(req.target.substr(0, req.target.find('?')) + "/");
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  if (ec) return error(res, 403, "cannot list this folder");
  std::sort(entries.begin(), entries.end());
  std::string body = "<h1>" + html_escape(relative.empty() ? "/" : relative) + "</h1>\n";
  if (RunIndex::is_run(dir))
    body += "<p><a href=\"/run?path=" + url_segment(fs::path(relative).lexically_normal().generic_string()) +
            "\">live view of this run</a></p>\n";
  body += "<ul>\n";
  for (const fs::directory_entry& e : entries) {
    const std::string name = e.path().filename().string(), slash = e.is_directory(ec) ? "/" : "";
    body += "<li><a href=\"" + url_segment(name) + slash + "\">" + html_escape(name) + slash + "</a></li>\n";
  }
  res.set_content(plain_page(relative, body + "</ul>"), "text/html; charset=utf-8");
}

Server::Server(const ServeOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(options.dir, ec))
    fail(
        "{} is not a folder: give the folder that holds your runs (normlab serve DIR; train writes into e.g. "
        "runs/NAME with --run runs/NAME)",
        options.dir.string());
  impl_ = std::make_unique<Impl>(options, fs::canonical(options.dir));
  impl_->routes();
  const bool bound = options.port == 0 ? (impl_->port = impl_->http.bind_to_any_port(options.host)) > 0
                                       : impl_->http.bind_to_port(options.host, impl_->port = options.port);
  if (!bound)
    fail(
        "cannot listen on {}:{}: the port is in use or the address is not this machine's; choose another with "
        "--port N (--port 0 takes any free one) or --host",
        options.host, options.port);
}

Server::~Server() = default;

int Server::port() const { return impl_->port; }

std::string Server::url() const {
  const std::string& h = impl_->options.host;
  return fmt::format("http://{}:{}/", h.find(':') != std::string::npos ? "[" + h + "]" : h, impl_->port);
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop() { impl_->http.stop(); }

}  // namespace normlab::serve
