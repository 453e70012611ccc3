// `normlab export` (train/export.h): the weights without the optimizer state, byte for byte as the checkpoint holds
// them, a config.json with every constant a reader needs, and the tokenizer; clear errors for what it cannot export.
// Loading an export into PyTorch is tests/model/to_torch_test.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "model/placements/deepnorm.h"
#include "train/tiny_corpus.h"

namespace normlab::train::testing {
namespace {

// Trains `steps` steps of the tiny model with `sets` (--set assignments) on `data` into `run`, then exports it.
Json train_and_export(const fs::path& run, const fs::path& out, const fs::path& data,
                      const std::vector<std::string>& sets, const fs::path& scratch) {
  std::vector<std::string> args = {"train", "--run", run.string(), "--set", "data.dir=" + data.string()};
  for (const char* s :
       {"model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.max_seq_len=16",
        "train.seq_len=16", "train.batch_size=4", "train.steps=3", "train.eval_batches=1", "train.bleu_pairs=2"})
    args.insert(args.end(), {"--set", s});
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  const CliResult trained = run_cli(args, scratch);
  EXPECT_EQ(trained.exit_code, 0) << describe(trained);
  const CliResult exported = run_cli({"export", "--run", run.string(), "--out", out.string()}, scratch);
  EXPECT_EQ(exported.exit_code, 0) << describe(exported);
  EXPECT_NE(exported.out.find("exported step 3"), std::string::npos) << describe(exported);
  return Json::parse(slurp(out / "config.json"));
}

TEST(Export, WritesTheWeightsWithoutOptimizerStateTheConstantsAndTheTokenizer) {
  TempDir tmp("export");
  const fs::path run = tmp / "run", out = tmp / "export";
  const Json config = train_and_export(run, out, tiny_data_dir(), {"model.placement=deepnorm"}, tmp.path());

  const io::SafetensorsFile checkpoint = io::SafetensorsFile::read(run / "checkpoint.safetensors");
  const io::SafetensorsFile weights = io::SafetensorsFile::read(out / "model.safetensors");
  std::vector<std::string> expected;
  for (const std::string& name : checkpoint.names())
    if (!name.starts_with("optim.")) expected.push_back(name);
  EXPECT_EQ(weights.names(), expected) << "every weight and nothing else";
  for (const std::string& name : weights.names()) {
    const auto& a = weights.at(name);
    const auto& b = checkpoint.at(name);
    EXPECT_EQ(a.dtype, b.dtype) << name;
    EXPECT_EQ(a.shape, b.shape) << name;
    EXPECT_TRUE(a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size()) == 0)
        << name << ": not the checkpoint's bytes";
  }
  EXPECT_EQ(weights.metadata().at("format"), "normlab-export-v1");
  EXPECT_EQ(slurp(out / "tokenizer.model"), slurp(tiny_data_dir() / "tokenizer.model"));

  const Json run_model = Json::parse(slurp(run / "config.json"))["model"];
  EXPECT_EQ(config["format"], "normlab-export-v1");
  EXPECT_EQ(config["step"], 3);
  EXPECT_EQ(config["model"], run_model) << "the run's resolved model config, its vocabulary included";
  const io::Tokenizer tokenizer = io::Tokenizer::load(tiny_data_dir() / "tokenizer.model");
  const Json& vocab = config["vocab"];
  EXPECT_EQ(vocab["size"], kTinyVocab);
  EXPECT_EQ(vocab["tokenizer_size"], tokenizer.vocab_size());
  EXPECT_EQ(vocab["eos_id"], tokenizer.eos_id());
  EXPECT_EQ(vocab["unk_id"], tokenizer.unk_id());
  EXPECT_EQ(vocab["bos_id"], tokenizer.bos_id());
  EXPECT_TRUE(vocab["mask_id"].is_null()) << "a decoder has no [MASK]";
  const Json& constants = config["constants"];
  EXPECT_EQ(constants["norm_eps"], 1e-5);
  EXPECT_EQ(constants["embedding_scale"], 1.0);
  EXPECT_DOUBLE_EQ(constants["attention_scale"].get<double>(), 1 / std::sqrt(16.0));
  // DeepNet's decoder-only pair for L = 2: α = (2L)^(1/4), β = (8L)^(−1/4).
  EXPECT_DOUBLE_EQ(constants["deepnorm_alpha"]["layers"].get<double>(), std::pow(4.0, 0.25));
  EXPECT_DOUBLE_EQ(constants["deepnorm_beta"]["layers"].get<double>(), std::pow(16.0, -0.25));
  EXPECT_NE(config["batches"]["tokens"].get<std::string>().find("no BOS"), std::string::npos);
}

TEST(Export, StatesAnEncodersMaskIdAndGlmDeepNormConstants) {
  TempDir tmp("export");
  const Json config = train_and_export(tmp / "run", tmp / "export", tiny_data_dir(),
                                       {"model.shape=encoder", "model.placement=deepnorm",
                                        "model.options.deepnorm_constants=glm130b", "model.embed_scale=sqrt_d"},
                                       tmp.path());
  const Json& vocab = config["vocab"];
  EXPECT_EQ(vocab["size"], kTinyVocab + 1) << "the tokenizer's pieces and [MASK]";
  EXPECT_EQ(vocab["mask_id"], kTinyVocab);
  EXPECT_EQ(config["batches"]["mask_prob"], 0.15);
  EXPECT_EQ(config["model"]["options"]["deepnorm_constants"], "glm130b");
  // GLM-130B §2.1 for L = 2: α = (2L)^(1/2) = 2, β = (2L)^(−1/2) = 0.5.
  EXPECT_DOUBLE_EQ(config["constants"]["deepnorm_alpha"]["layers"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(config["constants"]["deepnorm_beta"]["layers"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(config["constants"]["embedding_scale"].get<double>(), std::sqrt(32.0));
}

TEST(Export, StatesAnEncoderDecodersBatchConventionsAndEachStacksConstants) {
  TempDir tmp("export");
  const Json config = train_and_export(
      tmp / "run", tmp / "export", tiny_pairs_dir(),
      {"model.shape=encoder_decoder", "model.placement=deepnorm", "model.encoder_layers=3"}, tmp.path());
  const int eos = config["vocab"]["eos_id"].get<int>();
  EXPECT_GE(eos, 0);
  const Json& batches = config["batches"];
  EXPECT_EQ(batches["start_id"], eos) << "the decoder's input starts with EOS";
  EXPECT_EQ(batches["pad_id"], eos) << "source and decoder input pad with EOS";
  EXPECT_EQ(batches["target_pad"], -1);
  const auto enc = model::deepnorm_constants(model::DeepNormArch::encoder_of_encoder_decoder, 3, 2);
  const auto dec = model::deepnorm_constants(model::DeepNormArch::decoder_of_encoder_decoder, 3, 2);
  EXPECT_DOUBLE_EQ(config["constants"]["deepnorm_alpha"]["encoder.layers"].get<double>(), enc.alpha);
  EXPECT_DOUBLE_EQ(config["constants"]["deepnorm_beta"]["encoder.layers"].get<double>(), enc.beta);
  EXPECT_DOUBLE_EQ(config["constants"]["deepnorm_alpha"]["decoder.layers"].get<double>(), dec.alpha);
  EXPECT_DOUBLE_EQ(config["constants"]["deepnorm_beta"]["decoder.layers"].get<double>(), dec.beta);
}

TEST(Export, RefusesWhatItCannotExportWithAClearMessage) {
  TempDir tmp("export");
  expect_cli_error(run_cli({"export", "--run", (tmp / "none").string(), "--out", (tmp / "e").string()}, tmp.path()),
                   {"checkpoint.safetensors does not exist", "normlab train --run"});
  const fs::path run = tmp / "run";
  train_and_export(run, tmp / "export", tiny_data_dir(), {}, tmp.path());
  expect_cli_error(
      run_cli({"export", "--run", run.string(), "--out", (tmp / "e2").string(), "--data", (tmp / "elsewhere").string()},
              tmp.path()),
      {"tokenizer.model does not exist", "--data DIR"});
  // Another corpus's tokenizer does not fit the model's vocabulary.
  expect_cli_error(
      run_cli({"export", "--run", run.string(), "--out", (tmp / "e3").string(), "--data", tiny_pairs_dir().string()},
              tmp.path()),
      {"pieces", "rows", "--data DIR"});
}

}  // namespace
}  // namespace normlab::train::testing
