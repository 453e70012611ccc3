#pragma once
// A run's full configuration: model, data and training sections of one JSON document.
#include <string>

#include "model/config.h"

namespace normlab::train {

// fp32; bf16: GEMM inputs rounded to bfloat16, summed in fp32 (engine/gemm.h), while the weights, the optimizer and
// every non-GEMM op stay fp32 (on a CPU without bf16 hardware a bf16 run says so and runs fp32); fp64: the whole
// model, its gradients and the optimizer in double, a check that an effect is not fp32's rounding (several times
// slower: its GEMMs are our own loops, not oneDNN's).
enum class Precision { fp32, bf16, fp64 };
inline constexpr Spellings<Precision, 3> kPrecisions{
    {{Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}, {Precision::fp64, "fp64"}}};

struct TrainConfig {
  int batch_size = 16;
  int seq_len = 128;
  int steps = 1000;
  int grad_accum = 1;  // micro-batches per optimizer step
  double lr = 1e-3;
  std::string schedule = "cosine";  // constant | cosine | linear | noam
  int warmup = 100;                 // steps of linear warm-up (noam: the step of the peak)
  double min_lr_ratio = 0.1;        // cosine/linear decay end, as a fraction of lr
  double beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8;
  double weight_decay = 0.1;  // decoupled; matrices and embeddings only
  double clip = 1.0;          // global gradient-norm clip; 0 = off
  int eval_every = 100;       // 0 = only at the end
  int eval_batches = 8;
  int checkpoint_every = 200;  // 0 = only at the end
  int log_every = 10;
  uint64_t seed = 1;
  int threads = 0;          // 0 = OpenMP's default
  int probe_every = 0;      // probes every N steps (probes.jsonl / probes.csv); 0 = off, costs nothing
  double spike_z = 6.0;     // flag a loss or grad-norm spike above this running z-score; 0 = off
  bool spike_skip = false;  // skip the optimizer update on a flagged spike
  double mask_prob = 0.15;  // an encoder's masked-LM rate (BERT's 15%, replaced 80/10/10); a decoder ignores it
  int bleu_pairs = 200;     // an encoder-decoder's final BLEU and chrF on this many validation pairs; 0 = none
  Precision precision = Precision::fp32;
};

// How the engine runs the model; nothing here changes what is computed (the tests compare the numbers bit for bit).
struct EngineConfig {
  bool fuse =
      true;  // run fused pairs (a residual add and its norm, a linear map and its GELU) as one kernel (engine/fusion.h)
  // Attention keeps no [B, H, T, T] probabilities for backward and recomputes them there, in blocks of 64 queries
  // (engine/ops/attention.cpp): less memory at long T, one more logits GEMM per block.
  bool recompute_attention = false;
};

struct RunConfig {
  model::ModelConfig model;
  // A `normlab prepare` output directory (scripts/setup.sh makes this one; an encoder_decoder's default is
  // data/kjv-rv, the parallel corpus it also makes).
  std::string data_dir = "data/kjv";
  TrainConfig train;
  EngineConfig engine;
};

// Reads {"model": {...}, "data": {"dir": ...}, "train": {...}, "engine": {...}} strictly; `where` names the
// source.
RunConfig read_run_config(const Json& doc, const std::string& where);
Json to_json(const RunConfig& config);

}  // namespace normlab::train
