#include "train/loader.h"

#include <algorithm>
#include <array>
#include <limits>

#include "common/error.h"
#include "common/rng.h"

namespace normlab::train {

Shard shard_of(int batch, int rank, int ranks) {
  return {batch / ranks * rank + std::min(rank, batch % ranks), batch / ranks + (rank < batch % ranks ? 1 : 0)};
}

std::vector<Pair> index_pairs(std::span<const int32_t> split, int32_t eos, int seq) {
  std::vector<Pair> pairs;
  int64_t start = 0;
  std::array<std::pair<int64_t, int64_t>, 2> sides{};  // (offset, length) of the source, then the target
  int side = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(split.size()); ++i) {
    if (split[static_cast<size_t>(i)] != eos) continue;
    sides[static_cast<size_t>(side)] = {start, i - start};
    start = i + 1;
    if (++side < 2) continue;
    side = 0;
    if (sides[0].second + 1 <= seq && sides[1].second + 1 <= seq)
      pairs.push_back({sides[0].first, sides[0].second, sides[1].first, sides[1].second});
  }
  return pairs;
}

Loader::Loader(std::span<const int32_t> train, std::span<const int32_t> val, int batch, int seq, uint64_t seed,
               Shard shard, Objective objective)
    : train_(train), val_(val), batch_(batch), seq_(seq), seed_(seed), shard_(shard), objective_(objective) {
  if (objective_.mask_prob < 0 || objective_.mask_prob > 1 ||
      (objective_.mask_prob > 0 && (objective_.vocabulary < 1 || objective_.mask_id < objective_.vocabulary)))
    fail("internal: a masked-LM objective with mask_prob {}, [MASK] {} and vocabulary {}", objective_.mask_prob,
         objective_.mask_id, objective_.vocabulary);
  if (shard_.rows == 0) shard_ = {0, batch};
  if (shard_.first_row < 0 || shard_.rows < 1 || shard_.first_row + shard_.rows > batch)
    fail("internal: a shard of rows {}..{} of a batch of {}", shard_.first_row, shard_.first_row + shard_.rows - 1,
         batch);
  if (objective_.pairs) {
    train_pairs_ = index_pairs(train, objective_.eos_id, seq);
    val_pairs_ = index_pairs(val, objective_.eos_id, seq);
    for (auto [pairs, name] : {std::pair{&train_pairs_, "train"}, std::pair{&val_pairs_, "validation"}})
      if (pairs->empty())
        fail(
            "the {} split has no sentence pair whose source and target (each with EOS) fit in seq_len = {}: raise "
            "train.seq_len",
            name, seq);
    return;
  }
  for (auto [split, name] : {std::pair{train, "train"}, std::pair{val, "validation"}})
    if (static_cast<int64_t>(split.size()) < seq + 1)
      fail(
          "the {} split has {} tokens, fewer than seq_len + 1 = {}: use a larger corpus, a larger val_fraction, or a "
          "shorter train.seq_len",
          name, split.size(), seq + 1);
}

void Loader::fill(std::span<const int32_t> source, int b, int64_t start, Batch& out) const {
  b -= shard_.first_row;
  if (b < 0 || b >= shard_.rows) return;  // another rank's row
  const auto at = static_cast<std::ptrdiff_t>(b) * seq_;
  std::copy_n(source.begin() + start, seq_, out.tokens.begin() + at);
  if (objective_.mask_prob > 0) std::fill_n(out.targets.begin() + at, seq_, -1);  // finish() sets the masked ones
  else std::copy_n(source.begin() + start + 1, seq_, out.targets.begin() + at);
}

void Loader::fill_pair(std::span<const int32_t> split, int b, const Pair& pair, Batch& out) const {
  b -= shard_.first_row;
  if (b < 0 || b >= shard_.rows) return;  // another rank's row
  const auto at = static_cast<std::ptrdiff_t>(b) * seq_;
  const auto from = [&](int64_t offset) { return split.begin() + offset; };
  std::fill_n(out.source.begin() + at, seq_, objective_.eos_id);
  std::copy_n(from(pair.source), pair.source_length, out.source.begin() + at);
  out.source_lengths[static_cast<size_t>(b)] = static_cast<int32_t>(pair.source_length + 1);
  std::fill_n(out.tokens.begin() + at, seq_, objective_.eos_id);
  std::copy_n(from(pair.target), pair.target_length, out.tokens.begin() + at + 1);
  std::fill_n(out.targets.begin() + at, seq_, -1);
  std::copy_n(from(pair.target), pair.target_length, out.targets.begin() + at);
  out.targets[static_cast<size_t>(at + pair.target_length)] = objective_.eos_id;
}

void Loader::resize(Batch& out) const {
  out.tokens.resize(static_cast<size_t>(shard_.rows * seq_));
  out.targets.resize(out.tokens.size());
  if (!objective_.pairs) return;
  out.source.resize(out.tokens.size());
  out.source_lengths.resize(static_cast<size_t>(shard_.rows));
}

void Loader::finish_pairs(int64_t batch_targets, Batch& out) const {
  int64_t here = 0;  // this shard's share of the batch's target tokens
  for (int32_t t : out.targets) here += t >= 0;
  out.weight = static_cast<double>(here) / static_cast<double>(batch_targets);
}

void Loader::finish(uint64_t stream, Batch& out) const {
  if (objective_.mask_prob == 0) {
    out.weight = double(shard_.rows) / batch_;
    return;
  }
  int64_t chosen = 0, chosen_here = 0;
  for (int b = 0; b < batch_; ++b) {
    Rng rng(stream ^ (static_cast<uint64_t>(b) + 1) * 0x9E3779B97F4A7C15ULL);  // each row its own stream
    const int here = b - shard_.first_row;
    const bool mine = here >= 0 && here < shard_.rows;
    for (int t = 0; t < seq_; ++t) {
      if (rng.uniform() >= objective_.mask_prob) continue;
      const double how = rng.uniform();
      const auto random_token = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(objective_.vocabulary));
      ++chosen;
      if (!mine) continue;
      ++chosen_here;
      const size_t at = static_cast<size_t>(here) * static_cast<size_t>(seq_) + static_cast<size_t>(t);
      out.targets[at] = out.tokens[at];
      if (how < 0.8) out.tokens[at] = objective_.mask_id;
      else if (how < 0.9) out.tokens[at] = random_token;
    }
  }
  out.weight = chosen ? double(chosen_here) / double(chosen) : 0.0;
}

void Loader::train_batch(int step, int micro, Batch& out) const {
  resize(out);
  // The seed is hashed before the step enters, so neighbouring seeds draw unrelated windows.
  Rng rng(Rng(seed_).next() ^ (static_cast<uint64_t>(step) * 1000003ULL + static_cast<uint64_t>(micro)));
  if (objective_.pairs) {
    int64_t total = 0;
    for (int b = 0; b < batch_; ++b) {
      const Pair& pair = train_pairs_[rng.next() % train_pairs_.size()];
      fill_pair(train_, b, pair, out);
      total += pair.target_length + 1;
    }
    return finish_pairs(total, out);
  }
  const uint64_t starts = train_.size() - static_cast<size_t>(seq_);
  for (int b = 0; b < batch_; ++b) fill(train_, b, static_cast<int64_t>(rng.next() % starts), out);
  finish(rng.next(), out);
}

int Loader::eval_batches_available() const {
  const int64_t units = objective_.pairs ? static_cast<int64_t>(val_pairs_.size())
                                         : (static_cast<int64_t>(val_.size()) - 1) / std::max(seq_, 1);
  return static_cast<int>(std::clamp<int64_t>(units / std::max(batch_, 1), 1, std::numeric_limits<int>::max()));
}

void Loader::eval_batch(int index, int count, Batch& out) const {
  resize(out);
  if (objective_.pairs) {  // pairs spread evenly over the validation split
    const auto n = static_cast<int64_t>(val_pairs_.size()), rows = static_cast<int64_t>(count) * batch_;
    int64_t total = 0;
    for (int b = 0; b < batch_; ++b) {
      const int64_t r = static_cast<int64_t>(index) * batch_ + b;
      const Pair& pair = val_pairs_[static_cast<size_t>(rows > 1 ? r * (n - 1) / (rows - 1) : 0)];
      fill_pair(val_, b, pair, out);
      total += pair.target_length + 1;
    }
    return finish_pairs(total, out);
  }
  const int64_t starts = static_cast<int64_t>(val_.size()) - seq_;
  const int64_t windows = static_cast<int64_t>(count) * batch_;
  for (int b = 0; b < batch_; ++b) {
    const int64_t w = static_cast<int64_t>(index) * batch_ + b;
    fill(val_, b, windows > 1 ? w * (starts - 1) / (windows - 1) : 0, out);
  }
  finish(Rng(0x6D61736BULL + static_cast<uint64_t>(index)).next(), out);  // the same masks for every run
}

}  // namespace normlab::train
