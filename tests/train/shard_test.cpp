// Data-parallel shards (train/loader.h): the ranks' shards tile the batch, and together their loaders
// read exactly the batch of one process, for training and evaluation.
#include <gtest/gtest.h>

#include "io/corpus.h"
#include "train/loader.h"
#include "train/tiny_corpus.h"

namespace normlab::train::testing {
namespace {

TEST(Shard, RanksTileTheBatchWithSizesWithinOne) {
  for (int batch : {1, 2, 5, 7, 16})
    for (int ranks = 1; ranks <= batch; ++ranks) {
      int next = 0;
      for (int r = 0; r < ranks; ++r) {
        const Shard s = shard_of(batch, r, ranks);
        EXPECT_EQ(s.first_row, next) << batch << " rows, rank " << r << " of " << ranks;
        EXPECT_TRUE(s.rows == batch / ranks || s.rows == batch / ranks + 1);
        next += s.rows;
      }
      EXPECT_EQ(next, batch);
    }
}

TEST(Shard, ShardLoadersTogetherReadTheWholeBatch) {
  const io::TokenData data = io::load_tokens(tiny_data_dir().string());
  const int batch = 5, seq = 8;
  const Loader whole(data.train, data.val, batch, seq, 42);
  Batch all, part;
  for (int ranks : {2, 3}) {
    double weights = 0;
    for (int r = 0; r < ranks; ++r) {
      const Shard s = shard_of(batch, r, ranks);
      const Loader shard(data.train, data.val, batch, seq, 42, s);
      weights += shard.weight();
      for (int step : {1, 7}) {
        whole.train_batch(step, 1, all);
        shard.train_batch(step, 1, part);
        ASSERT_EQ(part.tokens.size(), static_cast<size_t>(s.rows * seq));
        EXPECT_TRUE(std::equal(part.tokens.begin(), part.tokens.end(), all.tokens.begin() + s.first_row * seq));
        EXPECT_TRUE(std::equal(part.targets.begin(), part.targets.end(), all.targets.begin() + s.first_row * seq));
      }
      whole.eval_batch(1, 3, all);
      shard.eval_batch(1, 3, part);
      EXPECT_TRUE(std::equal(part.tokens.begin(), part.tokens.end(), all.tokens.begin() + s.first_row * seq));
    }
    EXPECT_DOUBLE_EQ(weights, 1.0);
  }
}

}  // namespace
}  // namespace normlab::train::testing
