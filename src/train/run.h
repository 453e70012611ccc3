#pragma once
// Opening a run: config → threads → token data → model → checkpoint → loader. Train, eval, probe and
// generate all start this way, so it is written once (llm.c's gpt2_build_from_checkpoint).
#include <filesystem>
#include <memory>

#include "io/corpus.h"
#include "io/safetensors.h"
#include "model/transformer.h"
#include "train/loader.h"
#include "train/memory.h"
#include "train/train_config.h"

namespace normlab::train {

struct Run {
  RunConfig config;  // with model.vocab_size taken from the token data when it was 0 (plus [MASK] for an encoder)
  io::TokenData data;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<Loader> loader;  // null when opened without one (the caller reads tokens of its own)
  int step = 0;                    // the step of the loaded checkpoint; 0 when built from a config
  MemoryEstimate memory;           // made before the model was allocated
};

// What the run's model learns to predict: the next token (a decoder), masked tokens (an encoder) or a translation's
// next target token (an encoder-decoder, from pairs of `data`).
Objective objective_of(const RunConfig& config, const io::TokenData& data);

// Copies a batch into the model's inputs (the source too, for an encoder-decoder).
void feed(model::Model& m, const Batch& batch);

// A run from its config: applies train.threads, loads the token data and checks the vocabulary
// against it, builds the model for `batch` rows (0 = train.batch_size) of train.seq_len tokens and
// the loader. The weights are left at zero: initialize them or load a checkpoint. Before the model is
// allocated, its memory (with `needs` beside it) is estimated and a run that does not fit is refused.
// With `loader` false no loader is made over the token data (the caller brings tokens of its own, as probe --text
// does), so a split too short for one window is not refused.
// With `weights`, a model built without gradients keeps the parameters that file holds in BF16 as bf16
// (model::keep_bf16_weights), before it is estimated; load them from that file.
Run build_run(RunConfig config, int batch = 0, const MemoryNeeds& needs = {}, bool loader = true,
              const io::SafetensorsFile* weights = nullptr);

// The same up to the estimate: run.memory is filled in, but the model's graph is left unplanned
// (nothing big allocated) and no memory check is made. For normlab train --dry-run.
Run plan_run(RunConfig config, int batch = 0, const MemoryNeeds& needs = {}, bool loader = true,
             const io::SafetensorsFile* weights = nullptr);

// The run in run_dir from its checkpoint: the stored config, then its weights (not the optimizer's
// moments, which only the trainer needs). `needs` adds to the memory check what the caller builds beside it. Opened
// without gradients, it keeps the checkpoint's BF16 weights as bf16 (an imported model's: half the memory).
Run open_run(const std::filesystem::path& run_dir, int batch = 0, MemoryNeeds needs = {}, bool loader = true);

}  // namespace normlab::train
