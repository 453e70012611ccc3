#pragma once
// What a training run writes, one struct per record, with its JSON form: the lines of metrics.jsonl (train, eval,
// spike, non_finite) and summary.json. Every writer and reader in C++ goes through these, and the live view's
// JavaScript gets the same names from `record_fields()` (serve/pages.cpp), so a field is spelled once, here: a
// rename breaks the build or a test instead of silently emptying a chart or a judge.
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/config_reader.h"

namespace normlab::train {

// The spelling of every field of the records below.
namespace field {
inline constexpr const char* type = "type";
inline constexpr const char* step = "step";
inline constexpr const char* loss = "loss";
inline constexpr const char* lr = "lr";
inline constexpr const char* grad_norm = "grad_norm";
inline constexpr const char* tokens_per_s = "tokens_per_s";
inline constexpr const char* elapsed_s = "elapsed_s";
inline constexpr const char* val_loss = "val_loss";
inline constexpr const char* val_accuracy = "val_accuracy";
inline constexpr const char* loss_z = "loss_z";
inline constexpr const char* grad_norm_z = "grad_norm_z";
inline constexpr const char* update_skipped = "update_skipped";
inline constexpr const char* first = "first";
inline constexpr const char* unigram_entropy_nats = "unigram_entropy_nats";
inline constexpr const char* steps = "steps";
inline constexpr const char* train_loss = "train_loss";
inline constexpr const char* seconds = "seconds";
inline constexpr const char* parameters = "parameters";
inline constexpr const char* precision = "precision";
inline constexpr const char* bleu = "bleu";
inline constexpr const char* chrf = "chrf";
inline constexpr const char* bleu_pairs = "bleu_pairs";
inline constexpr const char* bleu_decoding = "bleu_decoding";
}  // namespace field

// The values of metrics.jsonl's "type".
namespace record_type {
inline constexpr const char* train = "train";
inline constexpr const char* eval = "eval";
inline constexpr const char* spike = "spike";
inline constexpr const char* non_finite = "non_finite";
}  // namespace record_type

// A record a reader could not take: which field, and what is wrong with it ("val_loss is not a number").
struct RecordError {
  std::string message;
};

// Every train.log_every steps (and the last): the step's loss, learning rate, gradient norm before clipping, and the
// throughput over the window since the last record.
struct TrainRecord {
  int step = 0;
  double loss = NAN, lr = NAN, grad_norm = NAN, tokens_per_s = NAN, elapsed_s = NAN;
  Json to_json() const;
  static TrainRecord from_json(const Json& j);  // throws RecordError
};

// Every train.eval_every steps (and the last): the validation loss and accuracy (train/trainer.h evaluate).
struct EvalRecord {
  int step = 0;
  double val_loss = NAN, val_accuracy = NAN;
  Json to_json() const;
  static EvalRecord from_json(const Json& j);
};

// A loss or gradient-norm spike (probe/guards.h), and whether its update was skipped (train.spike_skip).
struct SpikeRecord {
  int step = 0;
  double loss = NAN, loss_z = NAN, grad_norm = NAN, grad_norm_z = NAN;
  bool update_skipped = false;
  Json to_json() const;
};

// The run stopped on a non-finite value: where it showed first, the values that were not finite, and the corpus's
// unigram entropy (the studies' stand-in for a diverged run's loss: it learned no more than token frequencies).
struct NonFiniteRecord {
  int step = 0;
  std::string first;  // the first non-finite tensor, or ""
  double unigram_entropy_nats = NAN;
  std::vector<std::pair<std::string, double>> values;  // "loss", "grad_norm", "val_loss" as the trainer saw them
  Json to_json() const;
  static NonFiniteRecord from_json(const Json& j);
};

// The type of a metrics.jsonl line ("" when it has none).
std::string record_type_of(const Json& j);

// summary.json, written when a run has trained all its steps.
struct RunSummary {
  int steps = 0;
  double train_loss = NAN;    // last logged step
  double val_loss = NAN;      // final evaluation
  double val_accuracy = NAN;  // of the same
  double unigram_entropy_nats = NAN;
  double seconds = NAN;
  double tokens_per_s = NAN;
  int64_t parameters = 0;
  std::string precision;  // what the run computed in (train.precision as it ran: a bf16 run on a CPU without it: fp32)
  // An encoder-decoder's greedy translations of bleu_pairs validation pairs; NaN otherwise.
  double bleu = NAN, chrf = NAN;
  int bleu_pairs = 0;
  Json to_json() const;
  static RunSummary from_json(const Json& j);  // a missing field stays at its default; a wrong type throws
};

// What a run folder's files hold, for readers that take what is readable (the studies: a judge counts a missing
// number as missing): summary.json if it is there and readable, metrics.jsonl's train records and its non_finite
// record, skipping lines that are not such records (the live view reads them strictly, naming what it skips).
std::optional<RunSummary> read_run_summary(const std::filesystem::path& run_dir);
std::vector<TrainRecord> read_train_records(const std::filesystem::path& run_dir);
std::optional<NonFiniteRecord> read_non_finite(const std::filesystem::path& run_dir);

// The names above as one JSON object, keyed by their C++ names ({"val_loss": <its spelling>, ...}, the record types
// under "types"), for the live view's JavaScript.
Json record_fields();

}  // namespace normlab::train
