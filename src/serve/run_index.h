#pragma once
// What `normlab serve` reads from a directory of runs and studies. Training and studies write these
// files while the server reads them, so every read takes complete lines only (a line without its '\n'
// is still being appended) and copes with a file that shrank (a resumed run cuts metrics.jsonl back
// to its checkpoint's step). A file that cannot be read (not JSON, a field of the wrong type, not a
// regular file, a folder name that is not UTF-8, a symlink that leads out of the served folder) marks its run
// "unreadable" with the reason; the rest of the index is shown all the same. The index reads a path only where
// /files/ would serve it (resolve_under, safe_path.h).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/config_reader.h"

namespace normlab::serve {

// A run without summary.json counts as running while one of its files changed this recently; longer
// silent, it is stopped (killed or failed; `normlab train --resume` continues it). Two minutes covers
// the slowest logging interval of the presets (an evaluation plus a checkpoint between two logs).
inline constexpr double kRunningWindowSeconds = 120;

// Complete lines of a file from byte `offset`.
struct Tail {
  std::vector<std::string> lines;  // without their '\n'
  uint64_t next = 0;               // the offset just after the last line returned
  bool reset = false;              // the file is now shorter than `offset` (truncated or replaced): read from 0
  bool more = false;               // complete lines remain after `next` (max_bytes was reached)
};
// Stops after about max_bytes (never inside a line); a missing file, or one that is not a regular file, reads as
// empty.
Tail read_tail(const std::filesystem::path& file, uint64_t offset, size_t max_bytes);

// The index of every run and study under a root, recomputed on each call; a run's metrics are parsed
// again only when metrics.jsonl changed (size or time), so polling a large tree stays cheap.
//
// A run is a training run's folder (config.json, metrics.jsonl, probes.jsonl, summary.json) or a run
// of a study: the runner's folder <study>/runs/<id>/ (request.json, config.json, log.txt, status.json
// once it ended) with the training in its run/ subfolder, or, for an analysis-only run, only
// `normlab probe`'s analysis.jsonl.
class RunIndex {
 public:
  explicit RunIndex(std::filesystem::path root);
  // {"root": ..., "runs": [...], "studies": [...]}; paths relative to the root, with '/'. A run: path, kind (train
  // | analysis), files (the folder with its config.json, metrics.jsonl and probes.jsonl; null before a study's run
  // started training, and for an analysis-only run), analysis (its analysis.jsonl, or null), study (null for a run
  // of its own), viewable (false when its path cannot be written in JSON: a folder name that is not UTF-8), status
  // (running | finished | stalled | diverged | failed | stopped | queued | unreadable), message, placement, n_layers,
  // step, steps (for an analysis-only run: analyses written and requested), loss, val_loss, tokens_per_s, probes,
  // age_s, arm (a study's run: its id without the seed, "-s<seed>"; null otherwise). A study: path, status (running
  // | finished | stopped | unreadable), message, runs, done, running, verdict, report, arms (each arm's name, runs,
  // ended: the runs finished or stalled, and loss, val_loss: the mean over those of the last logged training loss
  // and the final validation loss; null when none ended).
  Json scan();
  // One run's entry (as in scan); `dir` lies under the root and is a run (is_run); a study's run/ subfolder stands
  // for its study run.
  Json run(const std::filesystem::path& dir);
  // Whether `dir` is a run directory: a training run's or a study run's folder.
  static bool is_run(const std::filesystem::path& dir);

  // What the index keeps of a metrics.jsonl: a few numbers, however long the file (it is read as a stream; a
  // 200 MB file once left the server holding 600 MB).
  struct Metrics {
    int64_t step = 0;
    double loss = NAN, val_loss = NAN, tokens_per_s = NAN;
    std::string non_finite;  // the first non-finite tensor of a diverged run ("" if none)
    bool diverged = false;
    bool stalled = false;  // by train::finished_outcome, when read for a finished run (`unigram` given)
    std::string problem;   // why a line cannot be read ("" when every line can)
  };

 private:
  // The run folders under the root, in the walk's order; the study folders go to `study_dirs`.
  std::vector<std::filesystem::path> walk(std::vector<std::filesystem::path>& study_dirs);
  // A study's entry (as in scan), from its folder and the index's runs.
  Json study(const std::filesystem::path& dir, const Json& runs);
  // `name` names the file in a problem's message (metrics.jsonl, run/metrics.jsonl); `unigram`, the corpus's unigram
  // entropy from summary.json, is given for a finished run, whose training losses are then judged stalled or not.
  Metrics metrics_of(const std::filesystem::path& file, const std::string& name, std::optional<double> unigram);

  std::filesystem::path root_;
  struct Cached {
    uintmax_t size;
    std::filesystem::file_time_type time;
    std::optional<double> unigram;
    Metrics metrics;
  };
  std::mutex mutex_;
  std::map<std::filesystem::path, Cached> cache_;
};

}  // namespace normlab::serve
