#pragma once
// Probes read named tensors of a training run every N steps, without touching the computation:
// activations and gradients after backward, parameters before and after the optimizer step.
// Records go to probes.jsonl (one line per step per quantity family; schema in docs/probes.md) and
// the same numbers in long form to probes.csv.
#include <filesystem>
#include <vector>

#include "common/config_reader.h"
#include "io/atomic_file.h"
#include "model/transformer.h"

namespace normlab::probe {

class TrainingProbe {
 public:
  // resume: keep the files and the reference logits of an earlier start. Every write is checked: a
  // failure throws io::WriteError naming the file.
  TrainingProbe(model::Model& m, const std::filesystem::path& run_dir, bool resume);

  // The fixed probe batch for ‖F(x, θ_t) − F(x, θ_0)‖; on a fresh start, F(x, θ_0) is computed and
  // saved (probe_reference.safetensors) so a resumed run measures against the same θ_0.
  void set_reference(const int32_t* tokens, const int32_t* targets, const int32_t* source = nullptr,
                     const int32_t* source_lengths = nullptr);
  // After the step's backward (activations of its last micro-batch, full gradients), before the update.
  void after_backward(int step, double loss, double grad_norm);
  // After the optimizer step.
  void after_update(int step);
  // Drops records after `step` (a resumed run rewrites them), refusing files whose probed steps up to `step` (1 and
  // every multiple of `probe_every`) are not all there or go back.
  static void truncate(const std::filesystem::path& run_dir, int step, int probe_every);
  // Closes both files, reporting any error.
  void close();

 private:
  void write(int step, const char* family, const Json& columns);

  model::Model& m_;
  std::filesystem::path dir_;
  io::LogFile jsonl_, csv_;
  void feed_reference();
  std::vector<int32_t> probe_tokens_, probe_targets_, probe_source_, probe_lengths_;  // source: encoder-decoders
  std::vector<double> reference_logits_, scratch_;
  std::vector<std::vector<double>> before_update_;  // parameter values before the step
};

}  // namespace normlab::probe
