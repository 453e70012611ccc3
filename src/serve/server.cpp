#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>

#include "common/error.h"
#include "serve/pages.h"
#include "serve/run_index.h"
#include "serve/safe_path.h"
#include "study/report.h"

namespace normlab::serve {

namespace fs = std::filesystem;
using study::html_escape;

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

}  // namespace

struct Server::Impl {
  ServeOptions options;
  fs::path root;  // canonical
  std::string chart_js;
  RunIndex index;
  httplib::Server http;
  int port = 0;

  Impl(const ServeOptions& o, fs::path canonical_root)
      : options(o), root(std::move(canonical_root)), chart_js(study::chart_js_source()), index(root) {}

  // A request's path or 400/403/404 with the reason.
  bool resolve(const std::string& relative, httplib::Response& res, fs::path& out) {
    const Resolved r = resolve_under(root, relative);
    if (r.status != 200) return error(res, r.status, r.reason), false;
    out = r.path;
    return true;
  }

  void routes();
  void tail(const httplib::Request& req, httplib::Response& res);
  void files(const httplib::Request& req, httplib::Response& res);
};

void Server::Impl::routes() {
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
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) error(res, res.status, res.status == 404 ? "no such page" : "bad request");
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      error(res, 500, e.what());
    }
  });

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
  if (fs::is_directory(target)) {
    // Relative links in the listing (and in a study's report.html) need the trailing slash.
    if (!req.path.ends_with('/')) return res.set_redirect(req.target.substr(0, req.target.find('?')) + "/");
    std::vector<fs::directory_entry> entries(fs::directory_iterator(target), fs::directory_iterator{});
    std::sort(entries.begin(), entries.end());
    std::string body = "<h1>" + html_escape(relative.empty() ? "/" : relative) + "</h1>\n";
    if (RunIndex::is_run(target))
      body += "<p><a href=\"/run?path=" + url_segment(fs::path(relative).lexically_normal().generic_string()) +
              "\">live view of this run</a></p>\n";
    body += "<ul>\n";
    for (const fs::directory_entry& e : entries) {
      const std::string name = e.path().filename().string(), slash = e.is_directory() ? "/" : "";
      body += "<li><a href=\"" + url_segment(name) + slash + "\">" + html_escape(name) + slash + "</a></li>\n";
    }
    return res.set_content(plain_page(relative, body + "</ul>"), "text/html; charset=utf-8");
  }
  // Streamed in pieces: a checkpoint can be large.
  const size_t size = fs::file_size(target);
  auto in = std::make_shared<std::ifstream>(target, std::ios::binary);
  res.set_content_provider(size, content_type(target), [in](size_t offset, size_t length, httplib::DataSink& sink) {
    std::string buffer(std::min<size_t>(length, 1 << 20), '\0');
    in->seekg(static_cast<std::streamoff>(offset));
    in->read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in->gcount() <= 0) return false;  // the file shrank under us: end the response
    return sink.write(buffer.data(), static_cast<size_t>(in->gcount()));
  });
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
