#pragma once
// The training loop: micro-batches → forward → backward (accumulating) → clip factor → AdamW,
// with a progress line, JSONL metrics, periodic evaluation and atomic checkpoints in a run directory.
#include <filesystem>
#include <iosfwd>
#include <memory>

#include "train/adamw.h"
#include "train/run.h"

namespace normlab::train {

struct TrainSummary {
  int steps = 0;
  double train_loss = 0;        // last logged step
  double val_loss = 0;          // final evaluation
  double unigram_entropy = 0;   // of the train split
  double unigram_val_xent = 0;  // the val split's cross-entropy under the train unigram
  double seconds = 0;
  double tokens_per_second = 0;
};

struct TrainOptions {
  bool resume = false;               // continue from run_dir's checkpoint
  int stop_after = -1;               // stop (with a checkpoint) once this step is done; -1 = train.steps
  std::ostream* progress = nullptr;  // progress lines; nullptr = silent
};

class Trainer {
 public:
  Trainer(RunConfig config, std::filesystem::path run_dir, TrainOptions options);
  ~Trainer();
  TrainSummary run();
  model::Model& model() { return *run_.model; }

 private:
  void log_metrics(const Json& record);
  void progress_line(int step, double loss, double lr, double tokens_per_s, double eta_s);
  [[noreturn]] void stop_non_finite(int step, double loss, double grad_norm);

  Run run_;
  std::filesystem::path run_dir_;
  TrainOptions options_;
  std::unique_ptr<AdamW> optimizer_;
  std::FILE* metrics_ = nullptr;
};

// Mean validation loss over `batches` fixed batches.
double evaluate(model::Model& m, const Loader& loader, int batches);

}  // namespace normlab::train
