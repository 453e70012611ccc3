#pragma once
// The training loop: micro-batches → forward → backward (accumulating) → clip factor → AdamW,
// with a progress line, JSONL metrics, periodic evaluation and atomic checkpoints in a run directory.
//
// Data-parallel under mpirun: each rank holds the whole model and a shard of every batch's rows
// (Loader), its gradients are summed over the ranks before the clip and the update, and every rank
// applies the same update, so the ranks' weights stay equal and the run follows the single-process
// one. Rank 0 alone writes (config, metrics, probes, checkpoints, summary) and prints progress.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/gemm.h"
#include "io/folder_lock.h"
#include "probe/guards.h"
#include "train/adamw.h"
#include "train/profile.h"
#include "train/records.h"
#include "train/run.h"

namespace normlab::io {
class LogFile;
}
namespace normlab::probe {
class TrainingProbe;
}

namespace normlab::train {

// What a run ends with: summary.json's record (train/records.h), and what the command line compares it with.
struct TrainSummary : RunSummary {
  double unigram_val_xent_nats = NAN;  // the val split's cross-entropy under the train unigram (not in summary.json)
};

struct TrainOptions {
  bool resume = false;               // continue from run_dir's checkpoint
  int stop_after = -1;               // stop (with a checkpoint) once this step is done; -1 = train.steps
  std::ostream* progress = nullptr;  // progress lines; nullptr = silent
  bool profile = false;              // time op kinds and phases: profile.json and a table on progress
};

class Trainer {
 public:
  Trainer(RunConfig config, std::filesystem::path run_dir, TrainOptions options);
  ~Trainer();
  TrainSummary run();
  model::Model& model() { return *run_.model; }

 private:
  // The recipe (train()), one step of it per function: resume_or_init → open_logs → for each step: step (batch →
  // forward → backward with the all-reduce → gradient norm) → after_backward (spikes, probes) → update (clip,
  // AdamW) → after_step (probes, logging, evaluation, checkpoint) → finish (profile, BLEU, summary.json).
  TrainSummary train();
  int resume_or_init();                // the step to start after: the checkpoint's, or 0 from a fresh init
  void open_logs(int start);           // metrics.jsonl (appending on resume), the probes and their reference
  int last_step(int start) const;      // where this process stops; refuses a finished run or a --stop-after
  void summarize_from_log(int start);  // a run killed between its final checkpoint and summary.json
  struct Step {
    int step = 0;
    double loss = 0, grad_norm = 0, lr = 0;
    bool spike = false, probing = false;
  };
  Step step(int step);                       // forward and backward over the micro-batches; stops on a non-finite value
  void after_backward(Step& s);              // the spike detectors and the probes that read the gradients
  void update(const Step& s);                // clip and AdamW, unless a spike is skipped
  void after_step(const Step& s, int last);  // the probes of the update, the train record, eval, checkpoint
  TrainSummary finish(int last);             // profile, BLEU, summary.json, closed logs

  void log_metrics(const Json& record);
  void progress_line(int step, double loss, double lr, double tokens_per_s, double eta_s);
  void save(int step);
  // Ends profiling: profile.json in the run directory and the table on the progress stream.
  void write_profile(int last_step, double loop_s);
  // The validation loss and accuracy over every rank, into summary_.
  void evaluate_into_summary();
  // What survives a stop: the last checkpoint written, or that there is none.
  std::string checkpoint_state() const;
  // Stops on a non-finite value at `step`: logs a non_finite record, saves the state after step − 1
  // when it is still in memory (`before_update`: a training step stops before its update) and finite,
  // and fails naming the first non-finite tensor.
  [[noreturn]] void stop_non_finite(int step, std::vector<std::pair<std::string, double>> values, bool before_update);

  using Clock = std::chrono::steady_clock;
  Run run_;
  std::filesystem::path run_dir_;
  std::optional<io::FolderLock> lock_;  // the run folder's, held by the writing rank
  TrainOptions options_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<io::LogFile> metrics_;
  std::unique_ptr<TrainProfile> profile_;         // with options.profile
  std::unique_ptr<probe::TrainingProbe> probes_;  // with train.probe_every, on the writing rank
  int saved_step_ = 0;                            // the step of the checkpoint on disk; 0 = none yet
  bool writer_ = true;                            // rank 0: the one process that writes the run's files
  engine::ScopedGemmPrecision precision_;         // the GEMM precision (train.precision) while this trainer lives
  // Loss and grad-norm spike detectors; their windows travel in the checkpoint.
  probe::SpikeDetector loss_spikes_, grad_spikes_;
  // The loop's state.
  Batch batch_;
  std::vector<size_t> final_gradients_;  // under mpirun: where each node's gradients end (the overlapped sum)
  Clock::time_point begin_, window_start_;
  int window_steps_ = 0;
  double last_loss_ = 0;  // the last step's loss, summary.json's train_loss
  TrainSummary summary_;
};

// What a training run holds besides its model (the memory estimate's inputs): AdamW, the probes when
// train.probe_every > 0, and on resume the checkpoint it reads.
MemoryNeeds training_needs(const RunConfig& config, const std::filesystem::path& run_dir, const TrainOptions& options);

// Over `batches` fixed validation batches: the mean loss, and the accuracy (the fraction of targets that are their
// row's most likely token: the next token for a decoder, the masked one for an encoder). With a sharded loader
// (data-parallel training) both are this shard's terms: their sums over the ranks are the means.
struct Evaluation {
  double loss = 0, accuracy = 0;
};
// `done`, when given, is called with the number of batches evaluated so far after each one.
Evaluation evaluate(model::Model& m, const Loader& loader, int batches, const std::function<void(int64_t)>& done = {});

}  // namespace normlab::train
