#include "serve/run_index.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "study/kit.h"

namespace normlab::serve {

namespace fs = std::filesystem;

Tail read_tail(const fs::path& file, uint64_t offset, size_t max_bytes) {
  Tail t;
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  if (ec) return t;  // not written yet
  if (offset > size) t.reset = true, offset = 0;
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string chunk(static_cast<size_t>(std::min<uintmax_t>(size - offset, max_bytes)), '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<size_t>(in.gcount()));
  const size_t end = chunk.rfind('\n');
  if (end == std::string::npos) {  // only a partial line (or one longer than max_bytes): nothing yet
    t.next = offset;
    return t;
  }
  for (size_t start = 0; start <= end;) {
    const size_t nl = chunk.find('\n', start);
    if (nl > start) t.lines.emplace_back(chunk, start, nl - start);
    start = nl + 1;
  }
  t.next = offset + end + 1;
  t.more = t.next < size && size - offset > max_bytes;
  return t;
}

namespace {

// model.placement as the page shows it: a built-in placement's name, or a formula's name and equation (a run made
// from a formula records the formula's object there, docs/variants.md).
std::string placement_text(const Json& model) {
  const Json p = model.value("placement", Json(""));
  if (!p.is_object()) return p.is_string() ? p.get<std::string>() : "";
  const Json name = p.value("name", Json()), sublayer = p.value("sublayer", Json());
  return fmt::format("{} (formula{})", name.is_string() ? name.get<std::string>() : "unnamed",
                     sublayer.is_string() ? fmt::format(": {}", sublayer.get<std::string>()) : std::string());
}

Json read_json(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return Json();
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  Json j = Json::parse(text, nullptr, false);
  return j.is_discarded() ? Json() : j;
}

double seconds_since(fs::file_time_type t) {
  return std::chrono::duration<double>(fs::file_time_type::clock::now() - t).count();
}

// A path relative to the root, with '/' ("" for the root itself).
std::string path_under(const fs::path& p, const fs::path& root) {
  const std::string r = p.lexically_relative(root).generic_string();
  return r == "." ? "" : r;
}

// A number for JSON: null when not finite (JSON has no NaN).
Json number(double v) { return std::isfinite(v) ? Json(v) : Json(); }

// A study directory: the grid runner gives each run a folder runs/<id>/ with its request.json.
bool is_study(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "report.md", ec) || fs::exists(dir / "summary.csv", ec)) return true;
  for (fs::directory_iterator it(dir / "runs", ec), end; !ec && it != end; it.increment(ec))
    if (fs::exists(it->path() / "request.json", ec)) return true;
  return false;
}

// The runner's folder around a study's training run: <study>/runs/<id>/run.
bool in_study_slot(const fs::path& run_dir) {
  std::error_code ec;
  return run_dir.filename() == "run" && fs::exists(run_dir.parent_path() / "request.json", ec);
}

// "## Verdict: reproduced" in report.md (study/report.cpp writes it).
std::string verdict_of(const fs::path& study_dir) {
  std::ifstream in(study_dir / "report.md");
  constexpr std::string_view kPrefix = "## Verdict: ";
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(kPrefix)) return line.substr(kPrefix.size());
  return "";
}

}  // namespace

RunIndex::RunIndex(fs::path root) : root_(std::move(root)) {}

bool RunIndex::is_run(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "config.json", ec);  // the trainer writes it before the first step
}

RunIndex::Metrics RunIndex::metrics_of(const fs::path& dir) {
  const fs::path file = dir / "metrics.jsonl";
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  if (ec) return {};
  const fs::file_time_type time = fs::last_write_time(file, ec);
  {
    std::lock_guard lock(mutex_);
    const auto it = cache_.find(file);
    if (it != cache_.end() && it->second.size == size && it->second.time == time) return it->second.metrics;
  }
  Metrics m;
  for (const std::string& line : read_tail(file, 0, static_cast<size_t>(size)).lines) {
    const Json j = Json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    const std::string type = j.value("type", "");
    if (type == "train") {
      m.step = j.value("step", m.step);
      m.loss = j.value("loss", NAN);
      m.tokens_per_s = j.value("tokens_per_s", NAN);
      m.curve.step.push_back(m.step);
      m.curve.loss.push_back(m.loss);
    } else if (type == "eval") {
      m.val_loss = j.value("val_loss", NAN);
    } else if (type == "non_finite") {
      m.diverged = true;
      m.non_finite = j.value("first", "");
    }
  }
  std::lock_guard lock(mutex_);
  cache_[file] = {size, time, m};
  return m;
}

Json RunIndex::run(const fs::path& dir) {
  const Json config = read_json(dir / "config.json");
  const Json summary = read_json(dir / "summary.json");
  const Metrics m = metrics_of(dir);
  double age = INFINITY;
  std::error_code ec;
  for (const char* name : {"config.json", "metrics.jsonl", "probes.jsonl"}) {
    const auto t = fs::last_write_time(dir / name, ec);
    if (!ec) age = std::min(age, seconds_since(t));
  }
  // The runner's status.json (studies) knows failures that leave no trace in the run's own files.
  const Json slot_status = in_study_slot(dir) ? read_json(dir.parent_path() / "status.json") : Json();
  std::string status, message;
  if (m.diverged) {
    status = "diverged", message = "non-finite values; first in " + (m.non_finite.empty() ? "?" : m.non_finite);
  } else if (slot_status.is_object() && slot_status.value("status", "") != "finished") {
    status = slot_status.value("status", "failed"), message = slot_status.value("message", "");
  } else if (summary.is_object()) {
    status = study::finished_outcome(m.curve, summary.value("unigram_entropy_nats", NAN)) == "stalled" ? "stalled"
                                                                                                       : "finished";
  } else {
    status = age < kRunningWindowSeconds ? "running" : "stopped";
  }
  const Json model = config.is_object() ? config.value("model", Json::object()) : Json::object();
  const Json train = config.is_object() ? config.value("train", Json::object()) : Json::object();
  Json study;  // the study that owns the run, when the root holds that study; null for a run of its own
  if (in_study_slot(dir)) {
    const std::string s = path_under(dir.parent_path().parent_path().parent_path(), root_);
    if (!s.starts_with("..")) study = s;
  }
  return {{"path", path_under(dir, root_)},
          {"study", study},
          {"status", status},
          {"message", message},
          {"placement", placement_text(model)},
          {"n_layers", model.value("n_layers", 0)},
          {"step", m.step},
          {"steps", train.value("steps", 0)},
          {"loss", number(m.loss)},
          {"val_loss", number(summary.is_object() ? summary.value("val_loss", m.val_loss) : m.val_loss)},
          {"tokens_per_s", number(m.tokens_per_s)},
          {"probes", fs::exists(dir / "probes.jsonl", ec)},
          {"age_s", number(age)}};
}

Json RunIndex::scan() {
  Json runs = Json::array(), studies = Json::array();
  std::error_code ec;
  // Symlinked directories are not followed: the index shows only what lies under the root.
  fs::recursive_directory_iterator it(root_, fs::directory_options::skip_permission_denied, ec), end;
  std::vector<fs::path> study_dirs;
  if (is_study(root_)) study_dirs.push_back(root_);
  for (; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    const fs::path dir = it->path();
    if (is_run(dir)) {
      runs.push_back(run(dir));
      it.disable_recursion_pending();  // a run holds no runs
    } else if (is_study(dir)) {
      study_dirs.push_back(dir);
    }
  }
  for (const fs::path& dir : study_dirs) {
    const std::string path = path_under(dir, root_);
    int total = 0, done = 0, running = 0;
    for (fs::directory_iterator slot(dir / "runs", ec), stop; !ec && slot != stop; slot.increment(ec)) {
      total += fs::exists(slot->path() / "request.json", ec);
      done += fs::exists(slot->path() / "status.json", ec);
    }
    for (const Json& r : runs) running += r["study"] == path && r["status"] == "running";
    const bool reported = fs::exists(dir / "report.html", ec);
    studies.push_back({{"path", path},
                       {"status", running > 0                 ? "running"
                                  : reported && done == total ? "finished"
                                                              : "stopped"},
                       {"runs", total},
                       {"done", done},
                       {"running", running},
                       {"verdict", verdict_of(dir)},
                       {"report", reported ? (path.empty() ? "report.html" : path + "/report.html") : ""}});
  }
  const auto by_path = [](const Json& a, const Json& b) {
    return a["path"].get<std::string>() < b["path"].get<std::string>();
  };
  std::sort(runs.begin(), runs.end(), by_path);
  std::sort(studies.begin(), studies.end(), by_path);
  return {{"root", root_.string()}, {"runs", runs}, {"studies", studies}};
}

}  // namespace normlab::serve
