// An encoder-decoder (model.shape = encoder_decoder) on a parallel corpus: the loader lays out each pair as the
// model reads it, a toy translation task is learned well enough to score a high BLEU with greedy decoding, a run
// resumes bit for bit, and mismatched data and shapes are refused with messages that say what to do.
#include <gtest/gtest.h>

#include "io/corpus.h"
#include "model/translate.h"
#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/run.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

using testing::slurp;
using testing::spit;
using testing::TempDir;
namespace fs = std::filesystem;

Json translation_doc(int steps, const std::string& placement = "pre") {
  Json doc = testing::tiny_config_doc(steps, testing::tiny_pairs_dir());
  doc["model"]["shape"] = "encoder_decoder";
  doc["model"]["placement"] = placement;
  doc["model"]["label_smoothing"] = 0.1;
  doc["train"]["batch_size"] = 16;
  return doc;
}

TEST(Translation, TheLoaderLaysOutEachPairAsTheModelReadsIt) {
  const io::TokenData data = io::load_tokens(testing::tiny_pairs_dir());
  ASSERT_TRUE(data.pairs);
  const int seq = 6;  // pairs of up to 5 words fit; 6-word ones are left out
  const std::vector<Pair> pairs = index_pairs(data.val, data.eos_id, seq);
  const std::vector<Pair> all = index_pairs(data.val, data.eos_id, 64);
  EXPECT_EQ(all.size(), 300u);
  ASSERT_LT(pairs.size(), all.size());
  for (const Pair& p : pairs) EXPECT_LE(std::max(p.source_length, p.target_length) + 1, seq);
  Loader loader(data.train, data.val, 4, seq, 1, {}, {.pairs = true, .eos_id = data.eos_id});
  Batch batch;
  loader.eval_batch(0, 1, batch);
  const int32_t eos = data.eos_id;
  int64_t targets = 0;
  for (int b = 0; b < 4; ++b) {
    const Pair& p = loader.val_pairs()[static_cast<size_t>(b * (loader.val_pairs().size() - 1) / 3)];
    const auto row = [&](const std::vector<int32_t>& v, int t) { return v[static_cast<size_t>(b * seq + t)]; };
    EXPECT_EQ(batch.source_lengths[static_cast<size_t>(b)], p.source_length + 1);
    for (int t = 0; t < p.source_length; ++t)
      EXPECT_EQ(row(batch.source, t), data.val[static_cast<size_t>(p.source + t)]);
    EXPECT_EQ(row(batch.source, static_cast<int>(p.source_length)), eos);
    EXPECT_EQ(row(batch.tokens, 0), eos);  // the decoder starts from EOS
    for (int t = 0; t < p.target_length; ++t) {
      EXPECT_EQ(row(batch.targets, t), data.val[static_cast<size_t>(p.target + t)]);
      EXPECT_EQ(row(batch.tokens, t + 1), row(batch.targets, t));  // teacher forcing: the input is the target, shifted
    }
    EXPECT_EQ(row(batch.targets, static_cast<int>(p.target_length)), eos);
    for (int t = static_cast<int>(p.target_length) + 1; t < seq; ++t) EXPECT_EQ(row(batch.targets, t), -1);
    targets += p.target_length + 1;
  }
  EXPECT_DOUBLE_EQ(batch.weight, 1.0);
  // Split over two ranks, each shard's weight is its share of the batch's target tokens.
  Loader first(data.train, data.val, 4, seq, 1, shard_of(4, 0, 2), {.pairs = true, .eos_id = eos});
  Loader second(data.train, data.val, 4, seq, 1, shard_of(4, 1, 2), {.pairs = true, .eos_id = eos});
  Batch a, b;
  first.eval_batch(0, 1, a);
  second.eval_batch(0, 1, b);
  EXPECT_NEAR(a.weight + b.weight, 1.0, 1e-12);
  int64_t counted = 0;
  for (int32_t t : a.targets) counted += t >= 0;
  EXPECT_NEAR(a.weight, double(counted) / double(targets), 1e-12);
}

TEST(Translation, AToyTaskIsLearnedAndTranslatedGreedilyAndByBeamSearch) {
  TempDir tmp;
  const RunConfig c = read_run_config(translation_doc(400), "translation test");
  const TrainSummary s = Trainer(c, tmp / "run", {}).run();
  EXPECT_LT(s.val_loss, 1.0) << "unigram " << s.unigram_entropy_nats;
  const testing::CliResult scored =
      testing::run_cli({"translate", "--run", (tmp / "run").string(), "--count", "100"}, tmp.path());
  ASSERT_EQ(scored.exit_code, 0) << testing::describe(scored);
  const Json summary = Json::parse(slurp(tmp / "run/translation.json"));
  EXPECT_EQ(summary["pairs"], 100);
  EXPECT_GT(summary["bleu"].get<double>(), 60) << scored.out;
  EXPECT_GT(summary["chrf"].get<double>(), 70) << scored.out;
  spit(tmp / "in.txt", "one two three\nten nine\n");
  const testing::CliResult typed = testing::run_cli(
      {"translate", "--run", (tmp / "run").string(), "--input", (tmp / "in.txt").string()}, tmp.path());
  ASSERT_EQ(typed.exit_code, 0) << testing::describe(typed);
  EXPECT_EQ(typed.out, "tres dos uno\nnueve diez\n");
  const testing::CliResult beamed = testing::run_cli(
      {"translate", "--run", (tmp / "run").string(), "--input", (tmp / "in.txt").string(), "--beam", "3"}, tmp.path());
  ASSERT_EQ(beamed.exit_code, 0) << testing::describe(beamed);
  EXPECT_EQ(beamed.out, "tres dos uno\nnueve diez\n");
  EXPECT_NE(beamed.err.find("beam 3"), std::string::npos) << beamed.err;
  // Beam search of width 1 is greedy search, token for token.
  train::Run run = open_run(tmp / "run", 16);
  std::vector<std::vector<int32_t>> sources;
  for (const Pair& p : run.loader->val_pairs())
    sources.emplace_back(run.data.val.begin() + p.source, run.data.val.begin() + p.source + p.source_length);
  sources.resize(40);
  EXPECT_EQ(model::translate_beam(*run.model, sources, run.data.eos_id, 1),
            model::translate_greedy(*run.model, sources, run.data.eos_id));
  // A wider beam still finds the translations (every source of the toy task has one right answer).
  const auto wide = model::translate_beam(*run.model, sources, run.data.eos_id, 4);
  int exact = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const Pair& p = run.loader->val_pairs()[i];
    exact += wide[i] ==
             std::vector<int32_t>(run.data.val.begin() + p.target, run.data.val.begin() + p.target + p.target_length);
  }
  EXPECT_GE(exact, 36) << "of 40";
}

TEST(Translation, APostLnRunResumesBitForBitAndGenerateRefusesIt) {
  TempDir tmp;
  const RunConfig c = read_run_config(translation_doc(8, "post"), "translation test");
  testing::expect_resume_is_exact(c, tmp.path());
  testing::expect_cli_error(testing::run_cli({"generate", "--run", (tmp / "split").string()}, tmp.path()),
                            {"is an encoder-decoder", "normlab translate"});
}

TEST(Translation, DataAndShapeMustAgree) {
  TempDir tmp;
  Json lm_on_pairs = testing::tiny_config_doc(2, testing::tiny_pairs_dir());
  try {
    Trainer(read_run_config(lm_on_pairs, "t.json"), tmp / "a", {}).run();
    FAIL() << "a decoder trained on sentence pairs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder_decoder"), std::string::npos) << e.what();
  }
  Json pairs_model_on_text = testing::tiny_config_doc(2);
  pairs_model_on_text["model"]["shape"] = "encoder_decoder";
  try {
    Trainer(read_run_config(pairs_model_on_text, "t.json"), tmp / "b", {}).run();
    FAIL() << "an encoder-decoder trained on running text";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--pairs"), std::string::npos) << e.what();
  }
  // Without data.dir an encoder-decoder reads the built-in parallel corpus.
  Json defaults{{"model", {{"shape", "encoder_decoder"}}}};
  EXPECT_EQ(read_run_config(defaults, "t.json").data_dir, "data/kjv-rv");
  EXPECT_EQ(read_run_config(Json::object(), "t.json").data_dir, "data/kjv");
  // Every placement is defined for encoder-decoders (docs/model.md), the stack-level ones too.
  for (const char* placement : {"normformer", "dlcl_post", "residual"})
    EXPECT_EQ(read_run_config(translation_doc(2, placement), "t.json").model.placement, placement);
  spit(tmp / "bad.tsv", "one two\tuno dos\nthree four\n");
  io::PrepareOptions o;
  o.inputs = {(tmp / "bad.tsv").string()};
  o.out_dir = (tmp / "bad").string();
  o.pairs = true;
  try {
    io::prepare_corpus(o);
    FAIL() << "a line without a tab accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace normlab::train
