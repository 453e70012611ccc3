// An encoder (model.shape = encoder) trained as a masked LM: it learns (its validation loss falls below the
// unigram entropy and it predicts masked tokens better than the most frequent token would), it resumes bit for
// bit, and the commands that make no sense for it say so.
#include <gtest/gtest.h>

#include <map>

#include "io/corpus.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

using testing::slurp;
using testing::TempDir;
namespace fs = std::filesystem;

RunConfig encoder_config(int steps, const std::string& placement = "pre") {
  Json doc = testing::tiny_config_doc(steps);
  doc["model"]["shape"] = "encoder";
  doc["model"]["placement"] = placement;
  doc["train"]["batch_size"] = 16;  // ~38 masked tokens per step
  return read_run_config(doc, "encoder test config");
}

TEST(Encoder, MaskedLmLearnsAndPredictsMaskedTokens) {
  TempDir tmp;
  const RunConfig c = encoder_config(1200);
  RunConfig longer = c;
  longer.train.log_every = 10;
  Trainer trainer(longer, tmp / "run", {});
  const TrainSummary s = trainer.run();
  // The vocabulary gained [MASK]: the tokenizer's 120 ids and one more.
  EXPECT_EQ(Json::parse(slurp(tmp / "run/config.json"))["model"]["vocab_size"], testing::kTinyVocab + 1);
  // A masked LM that ignores the context scores the unigram entropy at best, and its accuracy is at best the share
  // of the most frequent token; this one uses the context around each masked token. Measured: val loss 3.78 nats
  // (unigram 4.16), accuracy 0.16.
  EXPECT_LT(s.val_loss, s.unigram_entropy_nats - 0.2)
      << "val loss " << s.val_loss << ", unigram " << s.unigram_entropy_nats;
  const io::TokenData data = io::load_tokens(testing::tiny_data_dir().string());
  std::map<int32_t, int64_t> counts;
  for (int32_t t : data.val) ++counts[t];
  int64_t most = 0;
  for (const auto& [token, n] : counts) most = std::max(most, n);
  const double majority = double(most) / double(data.val.size());
  EXPECT_GT(s.val_accuracy, majority + 0.03) << "the most frequent token alone scores " << majority;
  const Json summary = Json::parse(slurp(tmp / "run/summary.json"));
  EXPECT_DOUBLE_EQ(summary["val_accuracy"].get<double>(), s.val_accuracy);
}

TEST(Encoder, PostLnEncoderResumesBitForBit) {
  TempDir tmp;
  const RunConfig c = encoder_config(8, "post");
  testing::expect_resume_is_exact(c, tmp.path());
  // An encoder does not continue a prompt: generate says so and points to eval, which scores it.
  const testing::CliResult generated = testing::run_cli({"generate", "--run", (tmp / "split").string()}, tmp.path());
  EXPECT_NE(generated.exit_code, 0);
  EXPECT_NE(generated.err.find("is an encoder"), std::string::npos) << generated.err;
  const testing::CliResult evaluated = testing::run_cli({"eval", "--run", (tmp / "split").string()}, tmp.path());
  EXPECT_EQ(evaluated.exit_code, 0) << evaluated.err;
  EXPECT_NE(evaluated.out.find("nats per masked token"), std::string::npos) << evaluated.out;
}

TEST(Encoder, AConfigThatCannotTrainAnEncoderIsRefused) {
  Json doc = testing::tiny_config_doc(5);
  doc["model"]["shape"] = "encoder";
  doc["train"]["mask_prob"] = 0.0;
  try {
    read_run_config(doc, "test.json");
    FAIL() << "mask_prob 0 was accepted for an encoder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.mask_prob"), std::string::npos) << e.what();
  }
  doc["train"]["mask_prob"] = 0.15;
  doc["model"]["shape"] = "encdec";
  try {
    read_run_config(doc, "test.json");
    FAIL() << "an unknown shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
  }
  // The tokenizer's vocabulary without [MASK] is the decoder's size, not the encoder's.
  doc["model"]["shape"] = "encoder";
  doc["model"]["vocab_size"] = testing::kTinyVocab;
  TempDir tmp;
  try {
    Trainer(read_run_config(doc, "test.json"), tmp / "run", {}).run();
    FAIL() << "an encoder without room for [MASK] was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[MASK]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace normlab::train
