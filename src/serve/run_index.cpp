#include "serve/run_index.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <string_view>

#include "serve/safe_path.h"
#include "train/outcome.h"
#include "train/records.h"

namespace normlab::serve {

namespace fs = std::filesystem;

namespace {

// The runner's and the trainer's JSON files (config, request, status, summary) hold a few KB; a larger one is not
// theirs and is not read.
constexpr uintmax_t kMaxJsonFileBytes = 16 << 20;
// metrics.jsonl is read as a stream, but whole on each change: the bound keeps one scan's work finite (a
// 100 000-step run logs about 20 MB).
constexpr uintmax_t kMaxMetricsBytes = 512 << 20;
// The trainer's lines hold well under 1 KB: a longer line is cut to this (and then reads as no JSON object), so a
// file without line ends cannot make the server hold it whole.
constexpr size_t kMaxLineBytes = 1 << 20;
constexpr size_t kReadChunkBytes = 256 << 10;

constexpr const char* kNotUtf8 = "its folder name is not UTF-8, which the web page cannot address: rename the folder";

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

// A study's run: the runner's folder <study>/runs/<id>/ with its request.json.
bool is_study_run(const fs::path& dir) {
  return dir.parent_path().filename() == "runs" && is_regular(dir / "request.json");
}

// A study's runs: the folders runs/<id>/ of `dir` that hold a request.json. A symlinked folder is not one, as the
// index's walk does not follow symlinks (what lies inside the root is listed where it lies).
std::vector<fs::path> study_runs_of(const fs::path& dir) {
  std::vector<fs::path> runs;
  std::error_code ec;
  for (fs::directory_iterator it(dir / "runs", ec), end; !ec && it != end; it.increment(ec))
    if (!it->is_symlink(ec) && is_study_run(it->path())) runs.push_back(it->path());
  return runs;
}

// A study directory: the grid runner gives each run a folder runs/<id>/ with its request.json.
bool is_study(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "report.md", ec) || fs::exists(dir / "summary.csv", ec) || !study_runs_of(dir).empty();
}

// Whether the server may read `p` (a path under `root`): where /files/ would serve it (resolve_under).
bool served(const fs::path& root, const fs::path& p) { return resolve_under(root, path_under(p, root)).status == 200; }

// "## Verdict: reproduced" in report.md (study/report.cpp writes it).
std::string verdict_of(const fs::path& root, const fs::path& study_dir) {
  const fs::path report = study_dir / "report.md";
  if (!served(root, report) || !is_regular(report)) return "";
  std::ifstream in(report);
  constexpr std::string_view kPrefix = "## Verdict: ";
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(kPrefix)) return shown(line.substr(kPrefix.size()));
  return "";
}

// Reads a run's files and fields, keeping the first thing that cannot be read, named by file and field, as the
// reason the run is unreadable. What cannot be read reads as absent.
class Reader {
 public:
  explicit Reader(const fs::path& root) : root_(root) {}
  const std::string& problem() const { return problem_; }
  void note(const std::string& why) {
    if (problem_.empty()) problem_ = why;
  }

  // Whether `p` may be read: only what /files/ would serve (resolve_under), so that the index shows nothing the
  // server refuses to send. A symlink out of the folder is a problem named by `name`; a missing file is none.
  bool reachable(const fs::path& p, const std::string& name) {
    const Resolved r = resolve_under(root_, path_under(p, root_));
    if (r.status == 403)
      note(name + " is a symlink that leads out of the served folder, which the server does not read: copy it in");
    else if (r.status == 400) note(name + ": " + r.reason + ", which the server refuses: rename the folder");
    return r.status == 200;
  }

  // A JSON file holding an object, or null when it is missing (not written yet) or cannot be read.
  Json object_file(const fs::path& file, const std::string& name) {
    if (!reachable(file, name)) return Json();
    std::error_code ec;
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

  const fs::path& root_;
  std::string problem_;
};

// Calls take(line, number) for each complete line among the first `size` bytes of `file` (a last line without its
// '\n' is still being written), a piece at a time: however long the file, only a piece and a line are held.
template <typename F>
void each_complete_line(const fs::path& file, uintmax_t size, F take) {
  std::ifstream in(file, std::ios::binary);
  std::string chunk(kReadChunkBytes, '\0'), line;
  int64_t number = 0;
  for (uintmax_t left = size; left > 0;) {
    in.read(chunk.data(), static_cast<std::streamsize>(std::min<uintmax_t>(left, chunk.size())));
    const size_t got = static_cast<size_t>(in.gcount());
    if (got == 0) return;  // the file shrank under us: what was read is all there is
    left -= got;
    const std::string_view piece(chunk.data(), got);
    for (size_t start = 0; start < got;) {
      const size_t nl = piece.find('\n', start), end = nl == std::string_view::npos ? got : nl;
      line.append(piece.substr(start, std::min(end - start, kMaxLineBytes - std::min(kMaxLineBytes, line.size()))));
      if (nl == std::string_view::npos) break;
      take(std::string_view(line), ++number);
      line.clear();
      start = nl + 1;
    }
  }
}

// One record of metrics.jsonl into what the index keeps; a finished run's training losses also go to `curve`.
void take_record(const Json& j, RunIndex::Metrics& m, train::TrainCurve* curve) {
  const std::string type = train::record_type_of(j);
  if (type == train::record_type::train) {
    const train::TrainRecord r = train::TrainRecord::from_json(j);
    m.step = r.step, m.loss = r.loss, m.tokens_per_s = r.tokens_per_s;
    if (curve) curve->step.push_back(static_cast<double>(r.step)), curve->loss.push_back(r.loss);
  } else if (type == train::record_type::eval) {
    m.val_loss = train::EvalRecord::from_json(j).val_loss;
  } else if (type == train::record_type::non_finite) {
    m.diverged = true;
    m.non_finite = train::NonFiniteRecord::from_json(j).first;
  }
}

// metrics.jsonl's first `size` bytes, as a stream. For a finished run (`unigram` given) the training losses are
// judged by the studies' rule, whose last-quarters test needs them all, and let go.
RunIndex::Metrics read_metrics(const fs::path& file, uintmax_t size, const std::string& name,
                               std::optional<double> unigram) {
  RunIndex::Metrics m;
  train::TrainCurve curve;
  each_complete_line(file, size, [&](std::string_view line, int64_t number) {
    if (line.empty()) return;
    const Json j = Json::parse(line, nullptr, false);
    std::string problem = j.is_object() ? "" : "not a JSON object";
    if (problem.empty()) try {
        take_record(j, m, unigram ? &curve : nullptr);
      } catch (const train::RecordError& e) {
        problem = e.message;
      }
    if (!problem.empty() && m.problem.empty()) m.problem = fmt::format("{} line {}: {}", name, number, problem);
  });
  if (unigram) m.stalled = train::finished_outcome(curve, *unigram) == train::Outcome::stalled;
  return m;
}

bool same_unigram(std::optional<double> a, std::optional<double> b) {
  return a.has_value() == b.has_value() && (!a || *a == *b || (std::isnan(*a) && std::isnan(*b)));
}

// The records of analysis.jsonl (`normlab probe` writes it whole, at its end), or -1 when there is none.
int64_t analysis_records(const fs::path& file, const std::string& name, Reader& reader) {
  if (!reader.reachable(file, name) || !is_regular(file)) return -1;
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

// Where a run's files lie: a run of its own holds them in its folder; a study's run (the runner's folder) holds the
// runner's files and, once its training started, the trainer's in run/.
struct RunFolders {
  fs::path run_dir, train_dir;
  bool study_run = false;
  std::string in_train_dir;  // "run/" for a study's run: how messages name the trainer's files
};

RunFolders folders_of(const fs::path& dir, const fs::path& root) {
  // A study's training run is shown as its study run, whose status the runner keeps beside it.
  const bool training_of_study_run = dir != root && dir.filename() == "run" && is_study_run(dir.parent_path());
  RunFolders f;
  f.run_dir = training_of_study_run ? dir.parent_path() : dir;
  f.study_run = training_of_study_run || is_study_run(f.run_dir);
  f.train_dir = f.study_run ? f.run_dir / "run" : f.run_dir;
  f.in_train_dir = f.study_run ? "run/" : "";
  return f;
}

// A run's entry before its files are read (RunIndex::scan's header lists the fields).
Json blank_entry(const std::string& path) {
  return {{"path", shown(path)},
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
          {"age_s", nullptr},
          {"arm", nullptr}};
}

// The JSON files of a run, each null when missing or unreadable.
struct RunFiles {
  Json request, config, summary_json, ended;
  train::RunSummary summary;
  bool analysis_only = false;  // a study's run of `normlab probe` on a fresh init
  bool training = false;       // the trainer's folder is there (a study's run/ once its training started)
};

// summary.json as the trainer writes it: whole (atomically), with every field of RunSummary::to_json. A field
// missing means the file was cut short or written by something else: the run is then unreadable, not finished.
train::RunSummary summary_of(const Json& j, const std::string& name, Reader& reader) {
  train::RunSummary summary;
  if (!j.is_object()) return summary;
  try {
    summary = train::RunSummary::from_json(j);
  } catch (const train::RecordError& e) {
    reader.note(name + ": " + e.message);
  }
  // What the trainer always writes: an empty summary's fields (BLEU's come only with a translation model's).
  static const Json written = train::RunSummary().to_json();
  for (auto field = written.begin(); field != written.end(); ++field)
    if (!j.contains(field.key()))
      reader.note(
          fmt::format("{} lacks {}, which the trainer always writes: it was cut short; delete it and resume the run "
                      "(normlab train --run DIR --resume) to write it again",
                      name, field.key()));
  return summary;
}

RunFiles read_run_files(const RunFolders& f, Reader& reader) {
  RunFiles r;
  r.request = f.study_run ? reader.object_file(f.run_dir / "request.json", "request.json") : Json();
  r.analysis_only = reader.text(r.request, "kind", "request.json: ") == "probe";
  std::error_code ec;
  r.training = !r.analysis_only && (!f.study_run || reader.reachable(f.train_dir, f.in_train_dir)) &&
               fs::is_directory(f.train_dir, ec);
  r.config = reader.object_file(f.run_dir / "config.json", "config.json");
  const std::string summary_name = f.in_train_dir + "summary.json";
  r.summary_json = r.training ? reader.object_file(f.train_dir / "summary.json", summary_name) : Json();
  r.summary = summary_of(r.summary_json, summary_name, reader);
  r.ended = f.study_run ? reader.object_file(f.run_dir / "status.json", "status.json") : Json();
  return r;
}

// The fields of a run's entry that its config, metrics and analyses give.
void fill_fields(Json& entry, const RunFolders& f, const RunFiles& r, const RunIndex::Metrics& m, const fs::path& root,
                 Reader& reader) {
  const Json model = reader.object(r.config, "model", "config.json: "),
             train = reader.object(r.config, "train", "config.json: ");
  entry["kind"] = r.analysis_only ? "analysis" : "train";
  if (r.training) entry["files"] = path_under(f.train_dir, root);
  // A run made from a formula records the formula's object there (docs/variants.md): shown by name and equation.
  const Json* placement = model.contains("placement") ? &model["placement"] : nullptr;
  entry["placement"] = placement && placement->is_object() ? placement_text(*placement)
                                                           : reader.text(model, "placement", "config.json: model.");
  entry["n_layers"] = reader.integer(model, "n_layers", "config.json: model.");
  const fs::path probes = f.train_dir / "probes.jsonl";
  entry["probes"] = r.training && reader.reachable(probes, f.in_train_dir + "probes.jsonl");
  const int64_t analyses = analysis_records(f.run_dir / "analysis.jsonl", "analysis.jsonl", reader);
  if (analyses >= 0) entry["analysis"] = path_under(f.run_dir / "analysis.jsonl", root);
  if (r.analysis_only) {
    const std::string requested = reader.text(r.request, "analyses", "request.json: ");
    entry["step"] = std::max<int64_t>(analyses, 0);
    entry["steps"] = requested.empty() ? 0 : std::count(requested.begin(), requested.end(), ',') + 1;
  } else {
    entry[train::field::step] = m.step;
    entry[train::field::steps] = reader.integer(train, "steps", "config.json: train.");
    entry[train::field::loss] = number(m.loss);
    entry[train::field::val_loss] = number(std::isnan(r.summary.val_loss) ? m.val_loss : r.summary.val_loss);
    entry[train::field::tokens_per_s] = number(m.tokens_per_s);
  }
}

// How long the run's writers have been silent: the trainer's files, and a study run's log and analyses (not its
// config.json and request.json: the runner writes those for every run of the grid before the first starts).
double silent_seconds(const RunFolders& f, Reader& reader) {
  double age = INFINITY;
  std::vector<std::string> written = {"config.json", "metrics.jsonl", "probes.jsonl"};
  for (std::string& name : written) name = f.in_train_dir + name;
  if (f.study_run) written.insert(written.end(), {"log.txt", "analysis.jsonl"});
  std::error_code ec;
  for (const std::string& name : written) {
    const fs::path file = f.run_dir / name;
    if (!reader.reachable(file, name)) continue;
    const auto t = fs::last_write_time(file, ec);
    if (!ec) age = std::min(age, seconds_since(t));
  }
  return age;
}

// A run's status and its message, from what its files say (docs/serve.md has the table).
std::pair<std::string, std::string> status_of(const RunFolders& f, const RunFiles& r, const RunIndex::Metrics& m,
                                              double age, Reader& reader) {
  const std::string stalled(train::outcome_name(train::Outcome::stalled)),
      diverged(train::outcome_name(train::Outcome::diverged));
  const std::string finished = r.summary_json.is_object() && m.stalled ? stalled : "finished";
  std::error_code ec;
  if (!reader.problem().empty()) return {"unreadable", reader.problem()};
  if (m.diverged) return {diverged, "non-finite values; first in " + (m.non_finite.empty() ? "?" : m.non_finite)};
  if (r.ended.is_object()) {  // the runner's status.json knows failures that leave no trace in the run's files
    const std::string status = reader.text(r.ended, "status", "status.json: "),
                      message = reader.text(r.ended, "message", "status.json: ");
    if (status != "finished" && status != diverged && status != "failed")
      reader.note(fmt::format("status.json: status is '{}', not finished, diverged or failed", shown(status)));
    if (!reader.problem().empty()) return {"unreadable", reader.problem()};
    return {status == "finished" ? finished : status, message};
  }
  // A study may still probe a run whose training wrote its summary.
  if (r.summary_json.is_object() && !(f.study_run && age < kRunningWindowSeconds)) return {finished, ""};
  if (age < kRunningWindowSeconds) return {"running", ""};
  // A study run without a log has not started: the study runs it later, or was stopped before it.
  return {f.study_run && !fs::exists(f.run_dir / "log.txt", ec) ? "queued" : "stopped", ""};
}

// A study's arm: the runs that differ only in their seed, named by the run's id without its "-s<seed>" (the
// runner's seed_id, study/kit.h); an id without one is an arm of its own.
std::string arm_of(const std::string& id) {
  const size_t dash = id.rfind("-s");
  const bool seeded = dash != std::string::npos && dash + 2 < id.size() &&
                      std::all_of(id.begin() + static_cast<std::ptrdiff_t>(dash) + 2, id.end(),
                                  [](unsigned char c) { return std::isdigit(c); });
  return seeded ? id.substr(0, dash) : id;
}

// Each arm of the study at `path` among the index's runs, by name: how many runs, how many
// ended with a loss (finished or stalled), and the mean of their final training and validation losses.
Json arms_of(const std::string& path, const Json& runs) {
  struct Arm {
    int runs = 0, ended = 0, val_ended = 0;
    double loss = 0, val_loss = 0;
  };
  std::map<std::string, Arm> arms;
  for (const Json& r : runs) {
    if (r["study"] != path) continue;
    Arm& a = arms[r["arm"].get<std::string>()];
    ++a.runs;
    const std::string status = r["status"].get<std::string>();
    if ((status != "finished" && status != train::outcome_name(train::Outcome::stalled)) ||
        !r[train::field::loss].is_number())
      continue;
    ++a.ended, a.loss += r[train::field::loss].get<double>();
    if (r[train::field::val_loss].is_number()) ++a.val_ended, a.val_loss += r[train::field::val_loss].get<double>();
  }
  Json out = Json::array();
  for (const auto& [name, a] : arms)
    out.push_back({{"arm", name},
                   {"runs", a.runs},
                   {"ended", a.ended},
                   {train::field::loss, a.ended ? Json(a.loss / a.ended) : Json()},
                   {train::field::val_loss, a.val_ended ? Json(a.val_loss / a.val_ended) : Json()}});
  return out;
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

RunIndex::Metrics RunIndex::metrics_of(const fs::path& file, const std::string& name, std::optional<double> unigram) {
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
    if (it != cache_.end() && it->second.size == size && it->second.time == time &&
        same_unigram(it->second.unigram, unigram))
      return it->second.metrics;
  }
  m = read_metrics(file, size, name, unigram);
  std::lock_guard lock(mutex_);
  cache_[file] = {size, time, unigram, m};
  return m;
}

Json RunIndex::run(const fs::path& dir) {
  const RunFolders f = folders_of(dir, root_);
  const std::string path = path_under(f.run_dir, root_);
  Json entry = blank_entry(path);
  if (f.study_run) {
    const std::string study = path_under(f.run_dir.parent_path().parent_path(), root_);
    if (!study.starts_with("..")) entry["study"] = shown(study);  // null when the root lies inside the study
    entry["arm"] = shown(arm_of(f.run_dir.filename().string()));
  }
  if (!is_utf8(path)) {
    entry["viewable"] = false, entry["status"] = "unreadable", entry["message"] = kNotUtf8;
    return entry;
  }
  Reader reader(root_);
  const RunFiles files = read_run_files(f, reader);
  const fs::path metrics = f.train_dir / "metrics.jsonl";
  const std::string metrics_name = f.in_train_dir + "metrics.jsonl";
  const std::optional<double> unigram =
      files.summary_json.is_object() ? std::optional(files.summary.unigram_entropy_nats) : std::nullopt;
  const Metrics m = files.training && reader.reachable(metrics, metrics_name)
                        ? metrics_of(metrics, metrics_name, unigram)
                        : Metrics();
  reader.note(m.problem);
  fill_fields(entry, f, files, m, root_, reader);
  const double age = silent_seconds(f, reader);
  entry["age_s"] = number(age);
  const auto [status, message] = status_of(f, files, m, age, reader);
  entry["status"] = status;
  entry["message"] = message;
  return entry;
}

std::vector<fs::path> RunIndex::walk(std::vector<fs::path>& study_dirs) {
  std::vector<fs::path> run_dirs;
  const auto visit = [&](const fs::path& dir) {
    if (is_run(dir)) run_dirs.push_back(dir);
    if (is_study(dir)) study_dirs.push_back(dir);
  };
  visit(root_);
  std::error_code ec;
  // Symlinked directories are not followed: the index shows only what lies under the root, each folder once, where
  // it lies. A run's folder may hold a study (the quickstart writes one into its run), so the walk goes on below
  // runs; a study run's folder holds only that run.
  fs::recursive_directory_iterator it(root_, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
    visit(it->path());
    if (is_study_run(it->path())) it.disable_recursion_pending();
  }
  return run_dirs;
}

Json RunIndex::study(const fs::path& dir, const Json& runs) {
  const std::string path = path_under(dir, root_);
  const std::vector<fs::path> slots = study_runs_of(dir);
  std::error_code ec;
  const int total = static_cast<int>(slots.size());
  const int done = static_cast<int>(
      std::count_if(slots.begin(), slots.end(), [&](const fs::path& s) { return fs::exists(s / "status.json", ec); }));
  int running = 0;
  for (const Json& r : runs) running += r["study"] == shown(path) && r["status"] == "running";
  const bool reported = served(root_, dir / "report.html") && is_regular(dir / "report.html");
  const bool named = is_utf8(path);
  return {{"path", shown(path)},
          {"status", !named                      ? "unreadable"
                     : running > 0               ? "running"
                     : reported && done == total ? "finished"
                                                 : "stopped"},
          {"message", named ? "" : kNotUtf8},
          {"runs", total},
          {"done", done},
          {"running", running},
          {"verdict", verdict_of(root_, dir)},
          {"report", reported && named ? (path.empty() ? "report.html" : path + "/report.html") : ""},
          {"arms", arms_of(shown(path), runs)}};
}

Json RunIndex::scan() {
  std::vector<fs::path> study_dirs;
  Json runs = Json::array(), studies = Json::array();
  for (const fs::path& dir : walk(study_dirs)) runs.push_back(run(dir));
  for (const fs::path& dir : study_dirs) studies.push_back(study(dir, runs));
  const auto by_path = [](const Json& a, const Json& b) {
    return a["path"].get<std::string>() < b["path"].get<std::string>();
  };
  std::sort(runs.begin(), runs.end(), by_path);
  std::sort(studies.begin(), studies.end(), by_path);
  return {{"root", shown(root_.string())}, {"runs", runs}, {"studies", studies}};
}

}  // namespace normlab::serve
