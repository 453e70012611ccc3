// BERT's masking (train/loader.h Objective): which positions are chosen, what replaces them, what the targets
// are, and that the masks are a pure function of (seed, step) for training and of nothing but the window for
// evaluation.
#include <gtest/gtest.h>

#include "io/corpus.h"
#include "train/loader.h"
#include "train/tiny_corpus.h"

namespace normlab::train::testing {
namespace {

TEST(MaskedLm, ChoosesFifteenPercentAndReplacesThemEightyTenTen) {
  const io::TokenData data = io::load_tokens(tiny_data_dir().string());
  const int batch = 16, seq = 32, vocab = data.vocab_size, mask = vocab;
  const Loader masked(data.train, data.val, batch, seq, 7, {}, Objective{0.15, mask, vocab});
  const Loader plain(data.train, data.val, batch, seq, 7);
  Batch m, p;
  int64_t positions = 0, chosen = 0, masked_out = 0, kept = 0, replaced = 0;
  for (int step = 1; step <= 200; ++step) {
    masked.train_batch(step, 0, m);
    plain.train_batch(step, 0, p);  // the same windows: p.tokens are the originals
    EXPECT_DOUBLE_EQ(m.weight, 1.0);
    for (size_t i = 0; i < m.tokens.size(); ++i) {
      ++positions;
      if (m.targets[i] < 0) {
        EXPECT_EQ(m.tokens[i], p.tokens[i]) << "an unchosen token changed";
        continue;
      }
      ++chosen;
      EXPECT_EQ(m.targets[i], p.tokens[i]) << "a masked position's target is its original token";
      if (m.tokens[i] == mask) ++masked_out;
      else if (m.tokens[i] == p.tokens[i]) ++kept;
      else ++replaced;
      EXPECT_LT(m.tokens[i], vocab + 1);
    }
  }
  // 102,400 positions: 15% ± 0.5% chosen; of ~15,000 chosen, 80/10/10 within ±1.5% (≥ 5 binomial sds).
  // A random replacement equals the original 1 time in `vocab`, counted as kept.
  EXPECT_NEAR(double(chosen) / positions, 0.15, 0.005);
  EXPECT_NEAR(double(masked_out) / chosen, 0.80, 0.015);
  EXPECT_NEAR(double(kept) / chosen, 0.10 + 0.10 / vocab, 0.015);
  EXPECT_NEAR(double(replaced) / chosen, 0.10 - 0.10 / vocab, 0.015);
}

TEST(MaskedLm, MasksFollowTheSeedInTrainingAndNotInEvaluation) {
  const io::TokenData data = io::load_tokens(tiny_data_dir().string());
  const Objective objective{0.15, data.vocab_size, data.vocab_size};
  const Loader a(data.train, data.val, 4, 16, 1, {}, objective), b(data.train, data.val, 4, 16, 2, {}, objective);
  Batch x, y;
  a.train_batch(3, 0, x);
  a.train_batch(3, 0, y);
  EXPECT_EQ(x.tokens, y.tokens);
  EXPECT_EQ(x.targets, y.targets);
  a.train_batch(4, 0, y);
  EXPECT_NE(x.targets, y.targets);
  a.eval_batch(2, 5, x);
  b.eval_batch(2, 5, y);
  EXPECT_EQ(x.tokens, y.tokens);
  EXPECT_EQ(x.targets, y.targets);
  EXPECT_TRUE(std::any_of(x.targets.begin(), x.targets.end(), [](int32_t t) { return t >= 0; }));
}

}  // namespace
}  // namespace normlab::train::testing
