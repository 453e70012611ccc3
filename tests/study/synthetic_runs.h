#pragma once
// Synthetic run directories, written in the formats real runs leave behind (the runner's status.json,
// the trainer's metrics.jsonl and summary.json, the training probes' probes.jsonl, `normlab probe`'s
// analysis.jsonl), so a judge can be fed chosen numbers without training anything.
#include <filesystem>
#include <string>
#include <vector>

#include "study/runner.h"
#include "study/studies.h"
#include "train/records.h"
#include "train/tiny_corpus.h"

namespace normlab::study::testing {

namespace fs = std::filesystem;

// A study's quick plan as finished runs under `dir`, with no files yet.
inline std::vector<RunOutcome> planned_runs(const Study& study, StudyOptions& options) {
  std::vector<RunOutcome> runs;
  for (const RunRequest& r : plan_study(study, options)) {
    RunOutcome o{r, options.dir / "runs" / r.id, RunStatus::finished, "", 1.0, resolve_config(r.config, r.id)};
    fs::create_directories(o.dir / "run");
    runs.push_back(std::move(o));
  }
  return runs;
}

inline RunOutcome& run_of(std::vector<RunOutcome>& runs, const std::string& id) {
  for (RunOutcome& r : runs)
    if (r.request.id == id) return r;
  throw std::runtime_error("no planned run " + id);
}

inline void append_line(const fs::path& file, const Json& record) {
  fs::create_directories(file.parent_path());
  train::testing::spit(file, train::testing::slurp(file) + record.dump() + "\n");
}

inline void write_status(const RunOutcome& o) {
  train::testing::spit(
      o.dir / "status.json",
      Json{{"status", status_name(o.status)}, {"message", o.message}, {"seconds", o.seconds}}.dump() + "\n");
}

// A training run's metrics.jsonl (a train record per loss, an eval record) and summary.json; the
// unigram entropy is 6 nats, so a final loss below 5.75 is "trained".
inline void write_training(const RunOutcome& o, const std::vector<double>& losses, double val_loss,
                           double seconds = 10) {
  const fs::path run = o.dir / "run";
  fs::create_directories(run);
  std::string metrics;
  const int steps = o.config["train"]["steps"].get<int>();
  const int every = std::max<int>(1, steps / static_cast<int>(losses.size()));
  for (size_t i = 0; i < losses.size(); ++i)
    metrics += Json{{"type", "train"},   {"step", every * static_cast<int>(i + 1)},
                    {"loss", losses[i]}, {"lr", 1e-3},
                    {"grad_norm", 1.0},  {"tokens_per_s", 1000.0},
                    {"elapsed_s", 1.0}}
                   .dump() +
               "\n";
  metrics += Json{{"type", "eval"}, {"step", steps}, {normlab::train::field::val_loss, val_loss}}.dump() + "\n";
  train::testing::spit(run / "metrics.jsonl", metrics);
  train::testing::spit(run / "summary.json", Json{{"steps", steps},
                                                  {"train_loss", losses.back()},
                                                  {normlab::train::field::val_loss, val_loss},
                                                  {"unigram_entropy_nats", 6.0},
                                                  {"seconds", seconds},
                                                  {"tokens_per_s", 1000.0},
                                                  {"parameters", 1000}}
                                                     .dump(2) +
                                                 "\n");
}

// Falling from 7 to `final_loss` over 8 logs: trained when final_loss < 5.75.
inline void write_trained(const RunOutcome& o, double final_loss = 4.0, double val_loss = NAN, double seconds = 10) {
  std::vector<double> losses;
  for (int i = 0; i < 8; ++i) losses.push_back(7.0 + (final_loss - 7.0) * std::min(1.0, i / 5.0));
  write_training(o, losses, std::isnan(val_loss) ? final_loss + 0.1 : val_loss, seconds);
}

// A translation run: trained (or stalled) as above, with its greedy BLEU in summary.json and a validation loss
// that falls as the BLEU rises (5.5 − BLEU/20), as a better translation model's does, unless val_loss is given.
inline void write_translation(const RunOutcome& o, double bleu, bool stalled = false, double val_loss = NAN) {
  if (stalled) write_training(o, {7.0, 6.3, 6.2, 6.2, 6.2, 6.2, 6.2, 6.2}, 6.2);
  else write_trained(o, 4.0, std::isnan(val_loss) ? 5.5 - bleu / 20 : val_loss);
  const fs::path file = o.dir / "run" / "summary.json";
  Json summary = Json::parse(train::testing::slurp(file));
  summary["bleu"] = bleu, summary["chrf"] = 2 * bleu;
  train::testing::spit(file, summary.dump(2) + "\n");
}

// A plateau at 6.2 nats (above the unigram entropy − 0.25): stalled.
inline void write_stalled(const RunOutcome& o) { write_training(o, {7.0, 6.3, 6.2, 6.2, 6.2, 6.2, 6.2, 6.2}, 6.2); }

// The trainer's record of a non-finite step, and the runner's status.
inline void write_diverged(RunOutcome& o) {
  o.status = RunStatus::diverged;
  o.message = "normlab: error: non-finite values at step 5 (loss nan, grad norm inf)";
  append_line(o.dir / "run" / "metrics.jsonl", Json{{"type", "train"},
                                                    {"step", 2},
                                                    {"loss", 7.0},
                                                    {"lr", 1e-3},
                                                    {"grad_norm", 1.0},
                                                    {"tokens_per_s", 1000.0},
                                                    {"elapsed_s", 1.0}});
  append_line(o.dir / "run" / "metrics.jsonl", Json{{"type", "non_finite"},
                                                    {"step", 5},
                                                    {"loss", NAN},
                                                    {"grad_norm", INFINITY},
                                                    {"first", "layers.0"},
                                                    {"unigram_entropy_nats", 6.0}});
}

// One training-probe record (probes.jsonl): {"step", "family", columns...}.
inline void write_probe(const RunOutcome& o, int step, const std::string& family, const Json& columns) {
  Json record{{"step", step}, {"family", family}};
  for (const auto& [k, v] : columns.items()) record[k] = v;
  append_line(o.dir / "run" / "probes.jsonl", record);
}

// One `normlab probe` analysis (analysis.jsonl beside the run): {"analysis", "result"}.
inline void write_analysis(const RunOutcome& o, const std::string& analysis, const Json& result) {
  append_line(o.dir / "analysis.jsonl", Json{{"analysis", analysis}, {"result", result}});
}

// {"layer": [0 .. n-1], column: values}
inline Json per_layer(const std::string& column, const std::vector<double>& values) {
  Json layers = Json::array();
  for (size_t i = 0; i < values.size(); ++i) layers.push_back(i);
  return Json{{"layer", layers}, {column, values}};
}

// The run failed: its files are gone and its status carries the error line.
inline void make_failed(RunOutcome& o, const std::string& message) {
  fs::remove_all(o.dir);
  fs::create_directories(o.dir);
  o.status = RunStatus::failed;
  o.message = message;
  write_status(o);
}

// The run finished but its files are gone (a lost record: a number a judge needs is missing).
inline void lose_files(const RunOutcome& o) {
  fs::remove_all(o.dir);
  fs::create_directories(o.dir);
}

}  // namespace normlab::study::testing
