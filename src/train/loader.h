#pragma once
// Batches of token windows. A training batch is a pure function of (seed, step, micro-batch): no
// loader state exists, so a resumed run reads exactly the batches it would have read. Evaluation
// uses fixed windows spread evenly over the validation split.
//
// In data-parallel training every rank's loader draws the whole batch and keeps its shard of the rows
// (rows [first_row, first_row + rows) of `batch`), so the ranks together read exactly the batch of a
// single process.
#include <cstdint>
#include <span>
#include <vector>

namespace normlab::train {

struct Batch {
  std::vector<int32_t> tokens, targets;  // [batch, seq], targets shifted by one
};

// The rows of each batch one process holds: rows [first_row, first_row + rows) of the batch.
struct Shard {
  int first_row = 0, rows = 0;  // rows = 0: the whole batch
};
// Rank `rank`'s share of `batch` rows split over `ranks` processes: sizes differ by at most one.
Shard shard_of(int batch, int rank, int ranks);

class Loader {
 public:
  Loader(std::span<const int32_t> train, std::span<const int32_t> val, int batch, int seq, uint64_t seed,
         Shard shard = {});
  void train_batch(int step, int micro, Batch& out) const;
  void eval_batch(int index, int count, Batch& out) const;  // index-th of `count` eval batches
  int rows() const { return shard_.rows; }                  // per batch, in this shard
  // This shard's share of a batch's tokens: a mean loss over the shard times this is its term of the
  // whole batch's mean.
  double weight() const { return double(shard_.rows) / batch_; }

 private:
  void fill(std::span<const int32_t> source, int b, int64_t start, Batch& out) const;
  std::span<const int32_t> train_, val_;
  int batch_, seq_;
  uint64_t seed_;
  Shard shard_;
};

}  // namespace normlab::train
