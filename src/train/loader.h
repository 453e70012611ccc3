#pragma once
// Batches of token windows. A training batch is a pure function of (seed, step, micro-batch): no
// loader state exists, so a resumed run reads exactly the batches it would have read. Evaluation
// uses fixed windows spread evenly over the validation split (and, for a masked LM, fixed masks: every
// run is scored on the same positions).
//
// In data-parallel training every rank's loader draws the whole batch and keeps its shard of the rows
// (rows [first_row, first_row + rows) of `batch`), so the ranks together read exactly the batch of a
// single process.
#include <cstdint>
#include <span>
#include <vector>

namespace normlab::train {

struct Batch {
  std::vector<int32_t> tokens, targets;  // [batch, seq]: the next tokens, or the masked tokens and −1 elsewhere
  // Translation only: the source [batch, seq] (padded with EOS) and its lengths [batch].
  std::vector<int32_t> source, source_lengths;
  // This shard's share of the whole batch's mean loss: its loss (a mean over its own targets) times this is its
  // term. 1 in a single process.
  double weight = 1;
};

// What the model learns to predict. Next token (mask_prob = 0): targets are the window shifted by one. Masked LM
// (BERT, Devlin et al. 2019 §3.1 and appendix A.1): each position is chosen with probability mask_prob; a chosen
// token is replaced by [MASK] 80% of the time, by a random token of the tokenizer's vocabulary 10%, and kept 10%;
// its target is the original token, every other target −1.
//
// Translation (pairs = true): the token data is source EOS target EOS, pair after pair. A row holds one pair: the
// source and its EOS (padded with EOS, its length given), the decoder's input EOS y₁ … y_n (EOS starts the target, as
// fairseq's decoders do) and the targets y₁ … y_n EOS, −1 on the padding. Pairs longer than seq on either side are
// left out.
struct Objective {
  double mask_prob = 0;
  int32_t mask_id = 0;     // the [MASK] id (the model's last)
  int32_t vocabulary = 0;  // the tokenizer's size: random replacements are drawn below it
  bool pairs = false;
  int32_t eos_id = 0;
};

// One pair of a parallel corpus: offsets and lengths (without EOS) in its token split.
struct Pair {
  int64_t source, source_length, target, target_length;
};
// The pairs of a split whose source and target, each with its EOS, fit in seq tokens.
std::vector<Pair> index_pairs(std::span<const int32_t> split, int32_t eos, int seq);

// The rows of each batch one process holds: rows [first_row, first_row + rows) of the batch.
struct Shard {
  int first_row = 0, rows = 0;  // rows = 0: the whole batch
};
// Rank `rank`'s share of `batch` rows split over `ranks` processes: sizes differ by at most one.
Shard shard_of(int batch, int rank, int ranks);

class Loader {
 public:
  Loader(std::span<const int32_t> train, std::span<const int32_t> val, int batch, int seq, uint64_t seed,
         Shard shard = {}, Objective objective = {});
  void train_batch(int step, int micro, Batch& out) const;
  void eval_batch(int index, int count, Batch& out) const;  // index-th of `count` eval batches
  // How many evaluation batches the validation split holds without reading any window or pair twice: more would
  // only repeat it (at least 1).
  int eval_batches_available() const;
  int rows() const { return shard_.rows; }  // per batch, in this shard
  // Translation: the validation pairs that fit, in corpus order (normlab translate scores them).
  const std::vector<Pair>& val_pairs() const { return val_pairs_; }
  std::span<const int32_t> val() const { return val_; }

 private:
  void fill(std::span<const int32_t> source, int b, int64_t start, Batch& out) const;
  void fill_pair(std::span<const int32_t> split, int b, const Pair& pair, Batch& out) const;
  void resize(Batch& out) const;
  // A translation batch's weight: this shard's target tokens over the whole batch's (batch_targets).
  void finish_pairs(int64_t batch_targets, Batch& out) const;
  // Masks every row of the batch from the random stream `stream` (rows of other shards are drawn, not stored) and
  // sets out.weight; a next-token batch only gets its weight.
  void finish(uint64_t stream, Batch& out) const;
  std::span<const int32_t> train_, val_;
  int batch_, seq_;
  uint64_t seed_;
  Shard shard_;
  Objective objective_;
  std::vector<Pair> train_pairs_, val_pairs_;
};

}  // namespace normlab::train
