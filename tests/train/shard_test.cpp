// Data-parallel shards (train/loader.h): the ranks' shards tile the batch, and together their loaders
// read exactly the batch of one process, for training and evaluation.
#include <gtest/gtest.h>

#include <map>

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

// For next-token and masked-LM batches: the shards hold the whole batch's rows, masks included, and their weights
// (each shard's share of the batch's mean loss) add up to 1 on every batch.
TEST(Shard, ShardLoadersTogetherReadTheWholeBatch) {
  const io::TokenData data = io::load_tokens(tiny_data_dir().string());
  const int batch = 5, seq = 8;
  for (const Objective objective : {Objective{}, Objective{0.3, data.vocab_size, data.vocab_size}}) {
    const Loader whole(data.train, data.val, batch, seq, 42, {}, objective);
    Batch all, part;
    for (int ranks : {2, 3}) {
      std::map<int, double> weights;  // per step; -1: the evaluation batch
      for (int r = 0; r < ranks; ++r) {
        const Shard s = shard_of(batch, r, ranks);
        const Loader shard(data.train, data.val, batch, seq, 42, s, objective);
        for (int step : {1, 7}) {
          whole.train_batch(step, 1, all);
          shard.train_batch(step, 1, part);
          ASSERT_EQ(part.tokens.size(), static_cast<size_t>(s.rows * seq));
          EXPECT_TRUE(std::equal(part.tokens.begin(), part.tokens.end(), all.tokens.begin() + s.first_row * seq));
          EXPECT_TRUE(std::equal(part.targets.begin(), part.targets.end(), all.targets.begin() + s.first_row * seq));
          weights[step] += part.weight;
        }
        whole.eval_batch(1, 3, all);
        shard.eval_batch(1, 3, part);
        EXPECT_TRUE(std::equal(part.tokens.begin(), part.tokens.end(), all.tokens.begin() + s.first_row * seq));
        EXPECT_TRUE(std::equal(part.targets.begin(), part.targets.end(), all.targets.begin() + s.first_row * seq));
        weights[-1] += part.weight;
      }
      for (const auto& [step, sum] : weights)
        EXPECT_DOUBLE_EQ(sum, 1.0) << "step " << step << ", " << ranks << " ranks";
    }
  }
}

}  // namespace
}  // namespace normlab::train::testing
