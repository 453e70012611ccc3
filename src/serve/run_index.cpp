#include "serve/run_index.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "train/records.h"

namespace normlab::serve {

namespace fs = std::filesystem;

namespace {

// The runner's and the trainer's JSON files (config, request, status, summary) hold a few KB; a larger one is not
// theirs and is not read.
constexpr uintmax_t kMaxJsonFileBytes = 16 << 20;
// metrics.jsonl is read whole for the index (a 100 000-step run logs about 20 MB).
constexpr uintmax_t kMaxMetricsBytes = 512 << 20;

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Whether `s` is valid UTF-8, which is what JSON can carry (nlohmann's dump refuses anything else).
bool is_utf8(const std::string& s) {
  try {
    (void)Json(s).dump();
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

// `s` with every byte that is not UTF-8 shown as U+FFFD, for names and text read from disk.
std::string shown(const std::string& s) {
  return Json::parse(Json(s).dump(-1, ' ', false, Json::error_handler_t::replace)).get<std::string>();
}

// A formula placement as the page shows it: its name and equation.
std::string placement_text(const Json& formula) {
  const Json name = formula.value("name", Json()), sublayer = formula.value("sublayer", Json());
  return fmt::format("{} (formula{})", name.is_string() ? shown(name.get<std::string>()) : "unnamed",
                     sublayer.is_string() ? ": " + shown(sublayer.get<std::string>()) : std::string());
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
    if (is_regular(it->path() / "request.json")) return true;
  return false;
}

// A study's run: the runner's folder <study>/runs/<id>/ with its request.json.
bool is_study_run(const fs::path& dir) {
  return dir.parent_path().filename() == "runs" && is_regular(dir / "request.json");
}

// "## Verdict: reproduced" in report.md (study/report.cpp writes it).
std::string verdict_of(const fs::path& study_dir) {
  if (!is_regular(study_dir / "report.md")) return "";
  std::ifstream in(study_dir / "report.md");
  constexpr std::string_view kPrefix = "## Verdict: ";
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(kPrefix)) return shown(line.substr(kPrefix.size()));
  return "";
}

// Reads a run's files and fields, keeping the first thing that cannot be read, named by file and field, as the
// reason the run is unreadable. What cannot be read reads as absent.
class Reader {
 public:
  const std::string& problem() const { return problem_; }
  void note(const std::string& why) {
    if (problem_.empty()) problem_ = why;
  }

  // A JSON file holding an object, or null when it is missing (not written yet) or cannot be read.
  Json object_file(const fs::path& file, const std::string& name) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(file, ec))) return Json();
    const uintmax_t size = fs::file_size(file, ec);
    if (!is_regular(file) || ec) return note(name + " is not a regular file"), Json();
    if (size > kMaxJsonFileBytes)
      return note(fmt::format("{} is larger than {} MB", name, kMaxJsonFileBytes >> 20)), Json();
    std::ifstream in(file, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded()) return note(name + " is not valid JSON"), Json();
    if (!j.is_object()) return note(name + " holds no JSON object"), Json();
    return j;
  }

  // The fields of an object read from `where` (a prefix such as "config.json: model."); an absent or null field
  // reads as `absent`, one of another type as `absent` and a problem.
  double number(const Json& obj, const char* key, const std::string& where, double absent = NAN) {
    const Json* v = field(obj, key);
    if (v && !v->is_number()) note(where + key + " is not a number");
    return v && v->is_number() ? v->get<double>() : absent;
  }
  int64_t integer(const Json& obj, const char* key, const std::string& where, int64_t absent = 0) {
    const Json* v = field(obj, key);
    if (v && !v->is_number_integer()) note(where + key + " is not an integer");
    return v && v->is_number_integer() ? v->get<int64_t>() : absent;
  }
  std::string text(const Json& obj, const char* key, const std::string& where) {
    const Json* v = field(obj, key);
    if (v && !v->is_string()) note(where + key + " is not a string");
    return v && v->is_string() ? v->get<std::string>() : "";
  }
  Json object(const Json& obj, const char* key, const std::string& where) {
    const Json* v = field(obj, key);
    if (v && !v->is_object()) note(where + key + " is not an object");
    return v && v->is_object() ? *v : Json::object();
  }

 private:
  static const Json* field(const Json& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  std::string problem_;
};

// The records of analysis.jsonl (`normlab probe` writes it whole, at its end), or -1 when there is none.
int64_t analysis_records(const fs::path& file, const std::string& name, Reader& reader) {
  if (!is_regular(file)) return -1;
  int64_t records = 0, line_number = 0;
  std::ifstream in(file, std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.empty()) continue;
    if (!Json::parse(line, nullptr, false).is_object())
      reader.note(fmt::format("{} line {} is not a JSON object", name, line_number));
    ++records;
  }
  return records;
}

}  // namespace

Tail read_tail(const fs::path& file, uint64_t offset, size_t max_bytes) {
  Tail t;
  std::error_code ec;
  if (!is_regular(file)) return t;  // not written yet (or a FIFO, which would block the reader)
  const uintmax_t size = fs::file_size(file, ec);
  if (ec) return t;
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
    t.lines.emplace_back(chunk, start, nl - start);
    start = nl + 1;
  }
  t.next = offset + end + 1;
  t.more = t.next < size && size - offset > max_bytes;
  return t;
}

RunIndex::RunIndex(fs::path root) : root_(std::move(root)) {}

bool RunIndex::is_run(const fs::path& dir) {
  // The trainer writes config.json before the first step, the runner request.json before it starts any run.
  return is_regular(dir / "config.json") || is_study_run(dir);
}

RunIndex::Metrics RunIndex::metrics_of(const fs::path& file, const std::string& name) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) return {};
  const uintmax_t size = fs::file_size(file, ec);
  Metrics m;
  if (!is_regular(file) || ec) return m.problem = name + " is not a regular file", m;
  if (size > kMaxMetricsBytes)
    return m.problem = fmt::format("{} is larger than {} MB", name, kMaxMetricsBytes >> 20), m;
  const fs::file_time_type time = fs::last_write_time(file, ec);
  {
    std::lock_guard lock(mutex_);
    const auto it = cache_.find(file);
    if (it != cache_.end() && it->second.size == size && it->second.time == time) return it->second.metrics;
  }
  Reader reader;
  int64_t line_number = 0;
  for (const std::string& line : read_tail(file, 0, static_cast<size_t>(size)).lines) {
    const std::string where = fmt::format("{} line {}: ", name, ++line_number);
    if (line.empty()) continue;
    const Json j = Json::parse(line, nullptr, false);
    if (!j.is_object()) {
      reader.note(where + "not a JSON object");
      continue;
    }
    try {
      const std::string type = train::record_type_of(j);
      if (type == train::record_type::train) {
        const train::TrainRecord r = train::TrainRecord::from_json(j);
        m.step = r.step, m.loss = r.loss, m.tokens_per_s = r.tokens_per_s;
        m.curve.step.push_back(static_cast<double>(m.step));
        m.curve.loss.push_back(m.loss);
      } else if (type == train::record_type::eval) {
        m.val_loss = train::EvalRecord::from_json(j).val_loss;
      } else if (type == train::record_type::non_finite) {
        m.diverged = true;
        m.non_finite = train::NonFiniteRecord::from_json(j).first;
      }
    } catch (const train::RecordError& e) {
      reader.note(where + e.message);
    }
  }
  m.problem = reader.problem();
  std::lock_guard lock(mutex_);
  cache_[file] = {size, time, m};
  return m;
}

Json RunIndex::run(const fs::path& dir) {
  // A study's training run is shown as its study run, whose status the runner keeps beside it.
  const bool training_of_study_run = dir != root_ && dir.filename() == "run" && is_study_run(dir.parent_path());
  const fs::path run_dir = training_of_study_run ? dir.parent_path() : dir;
  const bool study_run = training_of_study_run || is_study_run(run_dir);
  const std::string path = path_under(run_dir, root_);
  Json entry{{"path", shown(path)},
             {"kind", "train"},
             {"files", nullptr},
             {"analysis", nullptr},
             {"study", nullptr},
             {"viewable", true},
             {"status", "running"},
             {"message", ""},
             {"placement", ""},
             {"n_layers", 0},
             {train::field::step, 0},
             {train::field::steps, 0},
             {train::field::loss, nullptr},
             {train::field::val_loss, nullptr},
             {train::field::tokens_per_s, nullptr},
             {"probes", false},
             {"age_s", nullptr}};
  if (study_run) {
    const std::string study = path_under(run_dir.parent_path().parent_path(), root_);
    if (!study.starts_with("..")) entry["study"] = shown(study);  // null when the root lies inside the study
  }
  if (!is_utf8(path)) {
    entry["viewable"] = false, entry["status"] = "unreadable";
    entry["message"] = "its folder name is not UTF-8, which the web page cannot address: rename the folder";
    return entry;
  }

  Reader reader;
  const Json request = study_run ? reader.object_file(run_dir / "request.json", "request.json") : Json();
  const bool analysis_only = reader.text(request, "kind", "request.json: ") == "probe";
  // The training's files: the run's own folder, or a study run's run/ subfolder once its training started.
  const fs::path train_dir = study_run ? run_dir / "run" : run_dir;
  std::error_code ec;
  const bool training = !analysis_only && fs::is_directory(train_dir, ec);
  const std::string in_train_dir = study_run ? "run/" : "";
  const Json config = reader.object_file(run_dir / "config.json", "config.json");
  const Json summary_json =
      training ? reader.object_file(train_dir / "summary.json", in_train_dir + "summary.json") : Json();
  train::RunSummary summary;
  if (summary_json.is_object()) try {
      summary = train::RunSummary::from_json(summary_json);
    } catch (const train::RecordError& e) {
      reader.note(in_train_dir + "summary.json: " + e.message);
    }
  const Metrics m = training ? metrics_of(train_dir / "metrics.jsonl", in_train_dir + "metrics.jsonl") : Metrics();
  reader.note(m.problem);
  const Json ended = study_run ? reader.object_file(run_dir / "status.json", "status.json") : Json();

  const Json model = reader.object(config, "model", "config.json: "),
             train = reader.object(config, "train", "config.json: ");
  entry["kind"] = analysis_only ? "analysis" : "train";
  if (training) entry["files"] = path_under(train_dir, root_);
  // A run made from a formula records the formula's object there (docs/variants.md): shown by name and equation.
  const Json* placement = model.contains("placement") ? &model["placement"] : nullptr;
  entry["placement"] = placement && placement->is_object() ? placement_text(*placement)
                                                           : reader.text(model, "placement", "config.json: model.");
  entry["n_layers"] = reader.integer(model, "n_layers", "config.json: model.");
  entry["probes"] = training && fs::exists(train_dir / "probes.jsonl", ec);
  const int64_t analyses = analysis_records(run_dir / "analysis.jsonl", "analysis.jsonl", reader);
  if (analyses >= 0) entry["analysis"] = path_under(run_dir / "analysis.jsonl", root_);
  if (analysis_only) {
    const std::string requested = reader.text(request, "analyses", "request.json: ");
    entry["step"] = std::max<int64_t>(analyses, 0);
    entry["steps"] = requested.empty() ? 0 : std::count(requested.begin(), requested.end(), ',') + 1;
  } else {
    entry[train::field::step] = m.step;
    entry[train::field::steps] = reader.integer(train, "steps", "config.json: train.");
    entry[train::field::loss] = number(m.loss);
    entry[train::field::val_loss] = number(std::isnan(summary.val_loss) ? m.val_loss : summary.val_loss);
    entry[train::field::tokens_per_s] = number(m.tokens_per_s);
  }

  // How long the run's writers have been silent: the trainer's files, and a study run's log and analyses (not its
  // config.json and request.json: the runner writes those for every run of the grid before the first starts).
  double age = INFINITY;
  std::vector<fs::path> written = {train_dir / "config.json", train_dir / "metrics.jsonl", train_dir / "probes.jsonl"};
  if (study_run) written.insert(written.end(), {run_dir / "log.txt", run_dir / "analysis.jsonl"});
  for (const fs::path& file : written) {
    const auto t = fs::last_write_time(file, ec);
    if (!ec) age = std::min(age, seconds_since(t));
  }
  entry["age_s"] = number(age);

  const std::string stalled(train::outcome_name(train::Outcome::stalled)),
      diverged(train::outcome_name(train::Outcome::diverged));
  const auto finished_or_stalled = [&]() -> std::string {
    if (!summary_json.is_object()) return "finished";
    return train::finished_outcome(m.curve, summary.unigram_entropy_nats) == train::Outcome::stalled ? stalled
                                                                                                     : "finished";
  };
  std::string status, message;
  if (m.diverged) {
    status = diverged, message = "non-finite values; first in " + (m.non_finite.empty() ? "?" : m.non_finite);
  } else if (ended.is_object()) {  // the runner's status.json knows failures that leave no trace in the run's files
    status = reader.text(ended, "status", "status.json: ");
    message = reader.text(ended, "message", "status.json: ");
    if (status == "finished") status = finished_or_stalled();
    else if (status != diverged && status != "failed")
      reader.note(fmt::format("status.json: status is '{}', not finished, diverged or failed", shown(status)));
  } else if (summary_json.is_object() && !(study_run && age < kRunningWindowSeconds)) {  // a study may still probe it
    status = finished_or_stalled();
  } else if (age < kRunningWindowSeconds) {
    status = "running";
  } else {
    // A study run without a log has not started: the study runs it later, or was stopped before it.
    status = study_run && !fs::exists(run_dir / "log.txt", ec) ? "queued" : "stopped";
  }
  if (!reader.problem().empty()) status = "unreadable", message = reader.problem();
  entry["status"] = status;
  entry["message"] = message;
  return entry;
}

Json RunIndex::scan() {
  Json runs = Json::array(), studies = Json::array();
  std::vector<fs::path> study_dirs;
  const auto visit = [&](const fs::path& dir) {
    if (is_run(dir)) runs.push_back(run(dir));
    if (is_study(dir)) study_dirs.push_back(dir);
  };
  visit(root_);
  std::error_code ec;
  // Symlinked directories are not followed: the index shows only what lies under the root. A run's folder may hold
  // a study (the quickstart writes one into its run), so the walk goes on below runs; a study run's folder holds
  // only that run.
  fs::recursive_directory_iterator it(root_, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    visit(it->path());
    if (is_study_run(it->path())) it.disable_recursion_pending();
  }
  for (const fs::path& dir : study_dirs) {
    const std::string path = path_under(dir, root_);
    int total = 0, done = 0, running = 0;
    for (fs::directory_iterator slot(dir / "runs", ec), stop; !ec && slot != stop; slot.increment(ec)) {
      total += is_study_run(slot->path());
      done += is_study_run(slot->path()) && fs::exists(slot->path() / "status.json", ec);
    }
    for (const Json& r : runs) running += r["study"] == shown(path) && r["status"] == "running";
    const bool reported = is_regular(dir / "report.html");
    const bool named = is_utf8(path);
    studies.push_back(
        {{"path", shown(path)},
         {"status", !named                      ? "unreadable"
                    : running > 0               ? "running"
                    : reported && done == total ? "finished"
                                                : "stopped"},
         {"message", named ? "" : "its folder name is not UTF-8, which the web page cannot address: rename the folder"},
         {"runs", total},
         {"done", done},
         {"running", running},
         {"verdict", verdict_of(dir)},
         {"report", reported && named ? (path.empty() ? "report.html" : path + "/report.html") : ""}});
  }
  const auto by_path = [](const Json& a, const Json& b) {
    return a["path"].get<std::string>() < b["path"].get<std::string>();
  };
  std::sort(runs.begin(), runs.end(), by_path);
  std::sort(studies.begin(), studies.end(), by_path);
  return {{"root", shown(root_.string())}, {"runs", runs}, {"studies", studies}};
}

}  // namespace normlab::serve
