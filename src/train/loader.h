#pragma once
// Batches of token windows. A training batch is a pure function of (seed, step, micro-batch): no
// loader state exists, so a resumed run reads exactly the batches it would have read. Evaluation
// uses fixed windows spread evenly over the validation split.
#include <cstdint>
#include <span>
#include <vector>

namespace normlab::train {

struct Batch {
  std::vector<int32_t> tokens, targets;  // [batch, seq], targets shifted by one
};

class Loader {
 public:
  Loader(std::span<const int32_t> train, std::span<const int32_t> val, int batch, int seq, uint64_t seed);
  void train_batch(int step, int micro, Batch& out) const;
  void eval_batch(int index, int count, Batch& out) const;  // index-th of `count` eval batches

 private:
  void fill(std::span<const int32_t> source, int b, int64_t start, Batch& out) const;
  std::span<const int32_t> train_, val_;
  int batch_, seq_;
  uint64_t seed_;
};

}  // namespace normlab::train
