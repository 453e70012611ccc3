#pragma once
// The training loop: micro-batches → forward → backward (accumulating) → clip factor → AdamW,
// with a progress line, JSONL metrics, periodic evaluation and atomic checkpoints in a run directory.
//
// Data-parallel under mpirun: each rank holds the whole model and a shard of every batch's rows
// (Loader), its gradients are summed over the ranks before the clip and the update, and every rank
// applies the same update, so the ranks' weights stay equal and the run follows the single-process
// one. Rank 0 alone writes (config, metrics, probes, checkpoints, summary) and prints progress.
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "engine/gemm.h"
#include "io/folder_lock.h"
#include "probe/guards.h"
#include "train/adamw.h"
#include "train/profile.h"
#include "train/run.h"

namespace normlab::io {
class LogFile;
}

namespace normlab::train {

struct TrainSummary {
  int steps = 0;
  double train_loss = 0;        // last logged step
  double val_loss = 0;          // final evaluation
  double val_accuracy = 0;      // of the same (train/trainer.h evaluate)
  double unigram_entropy = 0;   // of the train split
  double unigram_val_xent = 0;  // the val split's cross-entropy under the train unigram
  double seconds = 0;
  double tokens_per_second = 0;
  double bleu = NAN, chrf = NAN;   // an encoder-decoder's greedy translations of train.bleu_pairs validation pairs
  std::string precision = "fp32";  // what the run computed in: fp32, bf16 (asked on a CPU without it: fp32) or fp64
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
  TrainSummary train();
  void log_metrics(const Json& record);
  void progress_line(int step, double loss, double lr, double tokens_per_s, double eta_s);
  void save(int step);
  // Ends profiling: profile.json in the run directory and the table on the progress stream.
  void write_profile(int last_step, double loop_s);
  // The validation loss and accuracy over every rank, into summary.
  void evaluate_into(TrainSummary& summary);
  // What survives a stop: the last checkpoint written, or that there is none.
  std::string checkpoint_state() const;
  // Stops on a non-finite value at `step`: logs a non_finite record, saves the state after step − 1
  // when it is still in memory (`before_update`: a training step stops before its update) and finite,
  // and fails naming the first non-finite tensor.
  [[noreturn]] void stop_non_finite(int step, std::initializer_list<std::pair<const char*, double>> values,
                                    bool before_update);

  Run run_;
  std::filesystem::path run_dir_;
  std::optional<io::FolderLock> lock_;  // the run folder's, held by the writing rank
  TrainOptions options_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<io::LogFile> metrics_;
  std::unique_ptr<TrainProfile> profile_;  // with options.profile
  int saved_step_ = 0;                     // the step of the checkpoint on disk; 0 = none yet
  bool writer_ = true;                     // rank 0: the one process that writes the run's files
  engine::ScopedGemmPrecision precision_;  // the GEMM precision (train.precision) while this trainer lives
  // Loss and grad-norm spike detectors; their windows travel in the checkpoint.
  probe::SpikeDetector loss_spikes_, grad_spikes_;
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
Evaluation evaluate(model::Model& m, const Loader& loader, int batches);

}  // namespace normlab::train
