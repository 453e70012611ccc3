// `normlab export` (train/export.h): the weights without the optimizer state, byte for byte as the checkpoint holds
// them, a config.json with every constant a reader needs, and the tokenizer; clear errors for what it cannot export.
// Loading an export into PyTorch is tests/model/to_torch_test.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <unistd.h>

#include "io/folder_lock.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "model/placements/deepnorm.h"
#include "train/tiny_corpus.h"

namespace normlab::train::testing {
namespace {

// `normlab train` of 3 steps of the tiny model with `sets` (--set assignments) on `data` into `run`.
std::vector<std::string> train_args(const fs::path& run, const fs::path& data, const std::vector<std::string>& sets) {
  std::vector<std::string> args = {"train", "--run", run.string(), "--set", "data.dir=" + data.string()};
  for (const char* s :
       {"model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.max_seq_len=16",
        "train.seq_len=16", "train.batch_size=4", "train.steps=3", "train.eval_batches=1", "train.bleu_pairs=2"})
    args.insert(args.end(), {"--set", s});
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  return args;
}

// Trains the tiny model (train_args) into `run`, then exports it.
Json train_and_export(const fs::path& run, const fs::path& out, const fs::path& data,
                      const std::vector<std::string>& sets, const fs::path& scratch) {
  const CliResult trained = run_cli(train_args(run, data, sets), scratch);
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
  EXPECT_EQ(weights.metadata().at("format"), "normlab-export-v2");
  EXPECT_EQ(slurp(out / "tokenizer.model"), slurp(tiny_data_dir() / "tokenizer.model"));

  const Json run_model = Json::parse(slurp(run / "config.json"))["model"];
  EXPECT_EQ(config["format"], "normlab-export-v2");
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
  EXPECT_TRUE(config["equations"]["cross_attention"].is_null()) << "a decoder has no cross-attention";
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
  // Issue 47.9: the decoder's cross-attention sub-layer is described, not left to the tensor names.
  const std::string cross = config["equations"]["cross_attention"].get<std::string>();
  for (const char* part : {"self-attention (causal), cross-attention, FFN", "decoder.layers.{i}.cross.*",
                           "keys and values from the encoder's output", "masked"})
    EXPECT_NE(cross.find(part), std::string::npos) << part << " in " << cross;
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

// Issue 47.4: an export never writes into a run. Its own run's folder would have its config.json replaced (and
// then could not resume), another run's likewise; a folder that a trainer or a study holds locked is refused naming
// the holder. The refused run resumes afterwards.
TEST(Export, RefusesARunsFolderAndALockedFolderAndTheRunStillResumes) {
  TempDir tmp("export");
  const fs::path run = tmp / "run";
  std::vector<std::string> args = train_args(run, tiny_data_dir(), {});
  args.insert(args.end(), {"--stop-after", "2"});
  const CliResult trained = run_cli(args, tmp.path());
  ASSERT_EQ(trained.exit_code, 0) << describe(trained);
  const std::string config = slurp(run / "config.json");
  const auto exported_to = [&](const fs::path& out) {
    return run_cli({"export", "--run", run.string(), "--out", out.string()}, tmp.path());
  };
  expect_cli_error(exported_to(run), {fmt::format("--out {} is the run's own folder", run.string()), "config.json"});
  fs::create_directory_symlink(run, tmp / "link");
  expect_cli_error(exported_to(tmp / "link"), {"the run's own folder"});
  expect_cli_error(exported_to(fmt::format("{}/", run.string())), {"the run's own folder"});
  const fs::path other = tmp / "other";
  fs::create_directories(other);
  fs::copy_file(run / "checkpoint.safetensors", other / "checkpoint.safetensors");
  expect_cli_error(exported_to(other), {fmt::format("--out {} holds a run", other.string())});
  EXPECT_FALSE(fs::exists(other / "config.json"));
  {
    const io::FolderLock held(tmp / "locked", "run folder");
    expect_cli_error(exported_to(tmp / "locked"),
                     {"export folder", "being written by another normlab process", std::to_string(::getpid())});
    EXPECT_FALSE(fs::exists(tmp / "locked" / "config.json"));
  }
  EXPECT_EQ(slurp(run / "config.json"), config);
  const CliResult resumed = run_cli({"train", "--run", run.string(), "--resume"}, tmp.path());
  EXPECT_EQ(resumed.exit_code, 0) << describe(resumed);
  const CliResult exported = exported_to(tmp / "fine");
  EXPECT_EQ(exported.exit_code, 0) << describe(exported);
  EXPECT_NE(exported.out.find("exported step 3"), std::string::npos) << describe(exported);
}

}  // namespace
}  // namespace normlab::train::testing
