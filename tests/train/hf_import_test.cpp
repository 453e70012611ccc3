// normlab import (train/hf_import.h) against tools/make_hf_checkpoints.py: the script writes random small checkpoints
// in each family's Hugging Face layout and its own forward pass's logits; the imported run must compute the same
// logits. The weights are drawn at scales that keep every activation of order 1, so a tensor taken from the wrong
// place, left untransposed, or given to the wrong key/value head moves the logits by far more than the tolerance.
// Needs python3-torch (scripts/test.sh installs it): without it these tests fail and say so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "serve/run_index.h"
#include "train/checkpoint.h"
#include "train/hf_import.h"
#include "train/tiny_corpus.h"

namespace normlab::train::testing {
namespace {

// The folder holding the script's checkpoint of `family`, made on first use (ctest runs each test in its own process:
// one family each, a few seconds).
fs::path generated(const std::string& family) {
  static TempDir dir("hf_checkpoints");
  static std::set<std::string> made;
  if (made.insert(family).second) {
    const std::string script = NORMLAB_SOURCE_DIR "/tools/make_hf_checkpoints.py";
    const int status = std::system(("/usr/bin/python3 " + shell_quote(script) + " " + shell_quote(dir.path().string()) +
                                    " --family " + family + " >/dev/null")
                                       .c_str());
    EXPECT_EQ(status, 0) << "tools/make_hf_checkpoints.py --family " << family << " failed";
  }
  return dir / family;
}

struct Agreement {
  double relative_l2 = NAN, max_abs = NAN, max_reference = 0;
};

// Imports the checkpoint in `source` (by default `family`'s, as generated) into `run` and runs the reference's tokens
// through it.
Agreement import_and_compare(const std::string& family, const fs::path& run, fs::path source = {}) {
  if (source.empty()) source = generated(family);
  const HfImportSummary summary = import_hf_checkpoint(source, run);
  EXPECT_EQ(summary.model_type, family);
  const CheckpointFile checkpoint = read_checkpoint(run / kCheckpointFile);
  const RunConfig config = checkpoint_config(checkpoint);
  const io::SafetensorsFile reference = io::SafetensorsFile::read(generated(family) / "reference.safetensors");
  const std::vector<int32_t> tokens = reference.at("tokens").copy_as<int32_t>();
  const std::vector<double> expected = reference.at("logits").to_f64_vector();
  const int t = static_cast<int>(tokens.size());
  // Opened as eval opens it: without gradients, a BF16 checkpoint's weights kept in bf16 (model::keep_bf16_weights).
  auto m = model::build_unplanned_model(config.model, 1, t);
  m->graph.set_gradients(false);
  const int bf16 = model::keep_bf16_weights(*m, checkpoint.file);
  EXPECT_EQ(bf16 > 0, summary.parameters_by_dtype.contains("BF16")) << family;
  m->graph.plan();
  m->reset_source();
  load_checkpoint(checkpoint, *m, nullptr);
  std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
  targets.push_back(0);
  m->set_batch(tokens.data(), targets.data());
  m->forward(false);
  const float* logits = m->graph.data<float>(m->logits);
  EXPECT_EQ(m->graph.shape(m->logits).numel(), static_cast<int64_t>(expected.size()));
  Agreement a{0, 0, 0};
  double norm = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double diff = logits[i] - expected[i];
    a.relative_l2 += diff * diff;
    norm += expected[i] * expected[i];
    a.max_abs = std::max(a.max_abs, std::abs(diff));
    a.max_reference = std::max(a.max_reference, std::abs(expected[i]));
  }
  a.relative_l2 = std::sqrt(a.relative_l2 / norm);
  return a;
}

void expect_same_logits(const std::string& family, const fs::path& source = {}) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import");
  const Agreement a = import_and_compare(family, tmp / "run", source);
  // fp32 against the reference's float64: rounding alone, relative to logits of order 1 to 20.
  EXPECT_LE(a.relative_l2, 1e-5) << family;
  EXPECT_LE(a.max_abs, 1e-5 * std::max(1.0, a.max_reference)) << family;
  std::cout << family << ": max |logit| " << a.max_reference << ", max abs difference " << a.max_abs << ", relative L2 "
            << a.relative_l2 << "\n";
}

// GPT-2: Conv1D weights stored [in, out], q, k, v fused in c_attn, learned positions, the head tied (F32, one file).
TEST(Import, Gpt2GivesTheReferenceLogits) { expect_same_logits("gpt2"); }

// --seq-len sets the window the run's eval and probe read (train.seq_len), within the model's max_seq_len.
TEST(Import, TheWindowIsTheOneAskedForWithinMaxSeqLen) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_window");
  EXPECT_EQ(import_hf_checkpoint(generated("llama"), tmp / "short", {}, {}, 5).config.train.seq_len, 5);
  EXPECT_EQ(checkpoint_config(read_checkpoint(tmp / "short" / kCheckpointFile)).train.seq_len, 5);
  try {
    import_hf_checkpoint(generated("llama"), tmp / "long", {}, {}, 100000);
    FAIL() << "a window past max_seq_len was imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--seq-len 100000 is outside 1.."), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp / "long" / kCheckpointFile));
}
// Llama: grouped-query attention (2 key/value heads for 4), an untied head, BF16 weights in 2 shards with an index.
TEST(Import, LlamaBf16ShardedGivesTheReferenceLogits) { expect_same_logits("llama"); }
// Qwen2: q, k, v biases, grouped-query attention, a tied head, RoPE base 1e6.
TEST(Import, Qwen2GivesTheReferenceLogits) { expect_same_logits("qwen2"); }
// Mistral: one key/value head for 4 query heads, a sliding window of 8 (the run's positions stop there), BF16.
TEST(Import, MistralGivesTheReferenceLogits) { expect_same_logits("mistral"); }
// Gemma 2: (1 + w) RMSNorm around each sub-layer, √d embedding, GeGLU (tanh), soft-caps 5 and 10, BF16.
TEST(Import, Gemma2GivesTheReferenceLogits) { expect_same_logits("gemma2"); }
// OLMo 2: norms on the sub-layers' outputs, full-width q and k norms (k's over 2 key/value heads), 3 shards.
TEST(Import, Olmo2GivesTheReferenceLogits) { expect_same_logits("olmo2"); }

// The original openai-community/gpt2 file names its tensors without GPT2LMHeadModel's "transformer." prefix.
TEST(Import, Gpt2WithoutTheTransformerPrefixGivesTheSameLogits) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_bare");
  fs::create_directories(tmp / "gpt2");
  fs::copy(generated("gpt2") / "config.json", tmp / "gpt2" / "config.json");
  const io::SafetensorsFile f = io::SafetensorsFile::read(generated("gpt2") / "model.safetensors");
  std::vector<io::TensorToWrite> tensors;
  for (const auto& e : f.entries()) {
    ASSERT_TRUE(e.name.starts_with("transformer.")) << e.name;
    tensors.push_back({e.name.substr(12), e.dtype, e.shape, e.data.data()});
  }
  io::write_safetensors(tmp / "gpt2" / "model.safetensors", tensors, f.metadata());
  expect_same_logits("gpt2", tmp / "gpt2");
}

// A BF16 checkpoint stays BF16 in the run's checkpoint: no rounding, half the disk of fp32.
TEST(Import, Bf16WeightsStayBf16InTheRun) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_bf16");
  const HfImportSummary s = import_hf_checkpoint(generated("llama"), tmp / "run");
  EXPECT_EQ(s.parameters_by_dtype.size(), 1u);
  EXPECT_EQ(s.parameters_by_dtype.count("BF16"), 1u);
  const io::SafetensorsFile run = io::SafetensorsFile::read(tmp / "run" / kCheckpointFile);
  for (const auto& e : run.entries()) EXPECT_EQ(e.dtype, io::Dtype::BF16) << e.name;
  EXPECT_EQ(run.at("layers.1.attn.k.weight").shape, (std::vector<int64_t>{32, 32}));  // 2 kv heads, copied per query
}

// A copy of `family`'s generated checkpoint, to damage.
fs::path copy_of(const std::string& family, const TempDir& tmp) {
  const fs::path dir = tmp / family;
  fs::copy(generated(family), dir, fs::copy_options::recursive);
  return dir;
}

// config.json with `key` set to `value` (JSON).
void set_config(const fs::path& dir, const std::string& key, const std::string& value) {
  Json config = Json::parse(slurp(dir / "config.json"));
  config[key] = Json::parse(value);
  spit(dir / "config.json", config.dump(2));
}

// `file` rewritten with tensor `name` replaced by its first `rows` rows (nothing else changed).
void truncate_rows(const fs::path& file, const std::string& name, int64_t rows) {
  const io::SafetensorsFile f = io::SafetensorsFile::read(file);
  std::vector<io::TensorToWrite> tensors;
  for (const auto& e : f.entries()) {
    std::vector<int64_t> shape = e.shape;
    if (e.name == name) shape[0] = rows;
    tensors.push_back({e.name, e.dtype, shape, e.data.data()});
  }
  io::write_safetensors(file, tensors, f.metadata());
}

CliResult import_cli(const fs::path& dir, const TempDir& tmp) {
  return run_cli({"import", dir.string(), "--out", (tmp / "run").string()}, tmp.path());
}

TEST(Import, AMissingShardIsNamedWithATensorItHolds) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_shard");
  const fs::path dir = copy_of("olmo2", tmp);
  fs::remove(dir / "model-00002-of-00003.safetensors");
  expect_cli_error(import_cli(dir, tmp), {(dir / "model-00002-of-00003.safetensors").string(), "is missing",
                                          "model.safetensors.index.json puts tensor 'model.", "download that shard"});
  EXPECT_FALSE(fs::exists(tmp / "run" / kCheckpointFile));
}

// Shards from two downloads: the index puts a tensor in a shard that lacks it, or two shards hold the same tensor.
TEST(Import, AnIndexThatDisagreesWithItsShardsIsNamed) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_index");
  const fs::path dir = copy_of("olmo2", tmp);
  const Json index = Json::parse(slurp(dir / "model.safetensors.index.json"));
  const std::string name = "model.norm.weight", home = index["weight_map"][name].get<std::string>();
  const std::string other = home == "model-00001-of-00003.safetensors" ? "model-00002-of-00003.safetensors"
                                                                       : "model-00001-of-00003.safetensors";
  Json moved = index;
  moved["weight_map"][name] = other;
  spit(dir / "model.safetensors.index.json", moved.dump());
  expect_cli_error(import_cli(dir, tmp), {(dir / other).string() + ": model.safetensors.index.json puts tensor '" +
                                          name + "' in it, but it does not hold it"});
  spit(dir / "model.safetensors.index.json", index.dump());
  const io::SafetensorsFile from = io::SafetensorsFile::read(dir / home);
  const io::SafetensorsFile to = io::SafetensorsFile::read(dir / other);
  std::vector<io::TensorToWrite> tensors;
  for (const auto& e : to.entries()) tensors.push_back({e.name, e.dtype, e.shape, e.data.data()});
  const auto& copy = from.at(name);
  tensors.push_back({copy.name, copy.dtype, copy.shape, copy.data.data()});
  io::write_safetensors(dir / other, tensors, to.metadata());
  expect_cli_error(import_cli(dir, tmp), {"tensor '" + name + "' is also in", "holds each tensor once"});
}

TEST(Import, ATensorOfTheWrongShapeIsNamedWithBothShapes) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_shape");
  const fs::path dir = copy_of("gpt2", tmp);
  truncate_rows(dir / "model.safetensors", "transformer.h.1.mlp.c_proj.weight", 64);  // [128, 32] stored
  expect_cli_error(import_cli(dir, tmp), {(dir / "model.safetensors").string(),
                                          "tensor 'transformer.h.1.mlp.c_proj.weight' has shape [64, 32]",
                                          "config.json's sizes give [128, 32]"});
}

TEST(Import, AnUnknownModelTypeIsRefusedNamingIt) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_type");
  const fs::path dir = copy_of("qwen2", tmp);
  set_config(dir, "model_type", "\"bert\"");
  expect_cli_error(import_cli(dir, tmp),
                   {(dir / "config.json").string(), "model_type = \"bert\"", "is not a family normlab imports"});
}

TEST(Import, AMissingTensorAndALeftOverTensorAreEachNamed) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_tensors");
  const fs::path dir = copy_of("mistral", tmp);
  set_config(dir, "num_hidden_layers", "3");  // the file has layers 0 and 1
  expect_cli_error(import_cli(dir, tmp), {"holds tensor 'model.layers.2.", "the download is incomplete"});
  set_config(dir, "num_hidden_layers", "1");  // layer 1's tensors are left over
  expect_cli_error(import_cli(dir, tmp), {(dir / "model.safetensors").string(), "tensor 'model.layers.1.",
                                          "has no place in a mistral model"});
  set_config(dir, "num_hidden_layers", "2");
  set_config(dir, "tie_word_embeddings", "true");  // the file's lm_head.weight is then ignored, as transformers does
  EXPECT_EQ(import_cli(dir, tmp).exit_code, 0);
}

TEST(Import, SettingsNormlabDoesNotComputeAreRefused) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_settings");
  const fs::path dir = copy_of("llama", tmp);
  set_config(dir, "rope_scaling", R"({"rope_type": "llama3", "factor": 8.0})");
  expect_cli_error(import_cli(dir, tmp), {"config.json: rope_scaling = ", "rescales RoPE's frequencies"});
  set_config(dir, "rope_scaling", "null");
  set_config(dir, "head_dim", "16");
  expect_cli_error(import_cli(dir, tmp), {"config.json: head_dim = 16", "hidden_size / num_attention_heads"});
}

// The run folder an import writes is a run like a trained one: eval, generate and probe open it. Its token data comes
// from --text through the checkpoint's tokenizer.model (here the toy corpus's 120-piece SentencePiece model, the
// vocabulary the script's checkpoints have).
TEST(Import, AnImportedRunWithItsTextIsOpenedByEvalGenerateAndProbe) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_run");
  const fs::path dir = copy_of("llama", tmp), run = tmp / "run", text = tmp / "text.txt";
  spit(text, tiny_corpus_text());
  const auto import = [&] {
    return run_cli({"import", dir.string(), "--out", run.string(), "--text", text.string()}, tmp.path());
  };
  expect_cli_error(import(), {dir.string() + " has no tokenizer.model", "nor vocab.json and merges.txt",
                              "give the ids with --token-ids FILE"});
  EXPECT_FALSE(fs::exists(run / kCheckpointFile));
  fs::copy(tiny_data_dir() / "tokenizer.model", dir / "tokenizer.model");
  const CliResult imported = import();
  ASSERT_EQ(imported.exit_code, 0) << describe(imported);
  EXPECT_NE(imported.out.find("imported llama"), std::string::npos) << describe(imported);
  EXPECT_NE(imported.out.find("note: grouped-query attention (2 key/value heads for 4 query heads)"), std::string::npos)
      << describe(imported);
  EXPECT_NE(imported.out.find("tokenized " + text.string() + " with its tokenizer.model"), std::string::npos)
      << describe(imported);
  EXPECT_NE(imported.out.find("opening it without gradients (eval, generate, probe's analyses of activations) needs "
                              "an estimated"),
            std::string::npos)
      << describe(imported);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"eval", "--run", run.string(), "--batches", "1"},
        std::vector<std::string>{"generate", "--run", run.string(), "--prompt", "the", "--tokens", "4"},
        std::vector<std::string>{"probe", "--run", run.string(), "--analysis", "angular,layer-drop", "--batches",
                                 "1"}}) {
    const CliResult r = run_cli(args, tmp.path());
    EXPECT_EQ(r.exit_code, 0) << args[0] << "\n" << describe(r);
  }
  EXPECT_NE(slurp(run / "analysis.jsonl").find("\"layer-drop\""), std::string::npos);
  // A second import into the same run would replace its weights under its results: refused.
  expect_cli_error(import(), {"already holds a checkpoint"});
}

// The eval a run's token data must support: one batch of the imported model's validation loss.
void expect_eval_runs(const fs::path& run, const TempDir& tmp) {
  const CliResult r = run_cli({"eval", "--run", run.string(), "--batches", "1"}, tmp.path());
  EXPECT_EQ(r.exit_code, 0) << describe(r);
}

// GPT-2's checkpoint carries vocab.json and merges.txt (the script's 120-id byte-level BPE): --text goes through them
// into the run's token data, and eval reads it. The pieces are worked out by hand from the script's merges.
TEST(Import, Gpt2TextIsTokenizedWithItsVocabAndMerges) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_bpe");
  const fs::path dir = copy_of("gpt2", tmp), run = tmp / "run", text = tmp / "text.txt";
  spit(text, tiny_corpus_text() + "the stoking\n");
  const CliResult imported =
      run_cli({"import", dir.string(), "--out", run.string(), "--text", text.string()}, tmp.path());
  ASSERT_EQ(imported.exit_code, 0) << describe(imported);
  EXPECT_NE(imported.out.find("tokenized " + text.string() + " with its vocab.json and merges.txt"), std::string::npos)
      << describe(imported);
  const io::TokenData data = io::load_tokens(run / "data");
  EXPECT_EQ(data.vocab_size, 120);
  EXPECT_EQ(data.eos_id, 119);  // <|endoftext|>
  // The last line is the validation block's end: "the" ("t h", "th e": id 97), " sto" ("Ġ" 94 ... "s t", "st o":
  // 106), "k" 74, "ing" ("i n", "in g": 113), then <|endoftext|>.
  ASSERT_GE(data.val.size(), 6u);
  EXPECT_EQ(std::vector<int32_t>(data.val.end() - 6, data.val.end()),
            (std::vector<int32_t>{97, 94, 106, 74, 113, 119}));
  expect_eval_runs(run, tmp);
}

TEST(Import, Gpt2TokenizerFilesThatCannotBeReadAreNamed) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_bpe_bad");
  const fs::path dir = copy_of("gpt2", tmp), run = tmp / "run", text = tmp / "text.txt";
  spit(text, "the first line\nthe second line\n");
  const auto import = [&] {
    return run_cli({"import", dir.string(), "--out", run.string(), "--text", text.string()}, tmp.path());
  };
  const std::string merges = slurp(dir / "merges.txt"), vocab = slurp(dir / "vocab.json");
  spit(dir / "merges.txt", merges + "a b c\n");
  expect_cli_error(import(), {(dir / "merges.txt").string() + " line 25 is \"a b c\", not two symbols"});
  fs::remove(dir / "merges.txt");
  expect_cli_error(import(), {(dir / "merges.txt").string(), "does not exist", "needs both vocab.json and merges.txt"});
  spit(dir / "merges.txt", merges);
  spit(dir / "vocab.json", R"({"a": 0, "b": [1]})");
  expect_cli_error(import(), {(dir / "vocab.json").string() + ": \"b\" maps to [1], not a token id"});
  spit(dir / "vocab.json", vocab);
  // The script's vocabulary holds ASCII bytes only.
  spit(text, "the first line\nthe séçond line\n");
  expect_cli_error(import(), {(dir / "vocab.json").string() + " has no entry for \"Ã\""});
  EXPECT_FALSE(fs::exists(run / kCheckpointFile));  // each refused before anything was written
}

// Any other tokenizer: the ids it made, in a file, become the run's token data; each is checked against the model's
// vocabulary before anything is written.
TEST(Import, TokenIdsFromAFileAreTheRunsData) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_ids");
  const fs::path dir = copy_of("llama", tmp), run = tmp / "run", ids = tmp / "ids.txt";
  const auto import = [&] {
    return run_cli({"import", dir.string(), "--out", run.string(), "--token-ids", ids.string()}, tmp.path());
  };
  spit(ids, "5 17\n3 119 0\t8 120 4");
  expect_cli_error(import(), {ids.string() + ": token 7 is '120', not one of the model's ids 0..119"});
  spit(ids, "5 17 x");
  expect_cli_error(import(), {ids.string() + ": token 3 is 'x'"});
  spit(ids, "5 -1");
  expect_cli_error(import(), {ids.string() + ": token 2 is '-1'"});
  EXPECT_FALSE(fs::exists(run / kCheckpointFile));
  std::string text;
  for (int i = 0; i < 2000; ++i) text += std::to_string((i * 37) % 120) + (i % 20 == 19 ? "\n" : " ");
  spit(ids, text);
  const CliResult imported = import();
  ASSERT_EQ(imported.exit_code, 0) << describe(imported);
  EXPECT_NE(imported.out.find("read the token ids of " + ids.string() + ": 1900 training and 100 validation tokens"),
            std::string::npos)
      << describe(imported);
  const io::TokenData data = io::load_tokens(run / "data");
  EXPECT_EQ(data.train.front(), 0);
  EXPECT_EQ(data.train[1], 37);
  EXPECT_EQ(data.val.back(), (1999 * 37) % 120);
  expect_eval_runs(run, tmp);
  expect_cli_error(run_cli({"generate", "--run", run.string(), "--prompt", "the"}, tmp.path()),
                   {(run / "data").string() + " has no tokenizer.model", "eval and probe run on it"});
  const CliResult both = run_cli(
      {"import", dir.string(), "--out", (tmp / "run2").string(), "--token-ids", ids.string(), "--text", ids.string()},
      tmp.path());
  expect_cli_error(both, {"--text and --token-ids both give the run's token data"});
}

// analysis.jsonl's results by analysis name.
std::map<std::string, Json> analysis_results(const fs::path& file) {
  std::map<std::string, Json> results;
  std::istringstream lines(slurp(file));
  for (std::string line; std::getline(lines, line);) {
    const Json record = Json::parse(line);
    results[record.at("analysis").get<std::string>()] = record.at("result");
  }
  return results;
}

// probe --text on a released model: the text goes through the run's own tokenizer (GPT-2's BPE, which import --text
// keeps in RUN/data) in place of the validation split; the four analyses of issue 49 run on it and make a report that
// the live view lists. The logit lens's last stream must give the loss layer-drop measures for the full model on the
// same windows.
TEST(Import, ProbeReadsATextThroughTheRunsTokenizerAndWritesAReport) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_probe_text");
  const fs::path dir = copy_of("gpt2", tmp), run = tmp / "run", text = tmp / "text.txt", out = tmp / "out";
  spit(text, tiny_corpus_text());
  const CliResult imported =
      run_cli({"import", dir.string(), "--out", run.string(), "--text", text.string()}, tmp.path());
  ASSERT_EQ(imported.exit_code, 0) << describe(imported);
  spit(text, tiny_corpus_text(30, 5));  // another text, short: every 16-token window of it is read
  const CliResult r = run_cli(
      {"probe", "--run", run.string(), "--analysis", "layer-drop,angular-distance,massive-activations,logit-lens",
       "--text", text.string(), "--out", out.string()},
      tmp.path());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("tokens of " + text.string() + " (through the run's gpt2-bpe tokenizer)"), std::string::npos)
      << describe(r);
  std::map<std::string, Json> results = analysis_results(out / "analysis.jsonl");
  ASSERT_EQ(results.size(), 4u);
  ASSERT_TRUE(results.contains("angular"));  // the alias's records keep the entry's name
  const Json &lens = results["logit-lens"], &drop = results["layer-drop"], &massive = results["massive-activations"];
  const double full = drop.at("full_loss").get<double>();
  EXPECT_NEAR(lens.at("model_loss").get<double>(), full, 1e-12 * full);
  EXPECT_NEAR(lens.at("loss").back().get<double>(), full, 1e-6 * full) << lens.dump();
  const size_t streams = lens.at("layer").size();
  ASSERT_EQ(massive.at("token").size(), streams);
  for (const Json& token : massive["token"]) EXPECT_FALSE(token.get<std::string>().empty()) << massive.dump();
  const std::string html = slurp(out / "probe-report" / "report.html");
  for (const char* chart : {"logit-lens: loss", "massive-activations: max_abs", "angular: angular_distance"})
    EXPECT_NE(html.find(chart), std::string::npos) << chart;
  const Json index = serve::RunIndex(tmp.path()).scan();
  const auto listed = std::find_if(index["studies"].begin(), index["studies"].end(),
                                   [](const Json& s) { return s["path"] == "out/probe-report"; });
  ASSERT_NE(listed, index["studies"].end()) << index.dump();
  EXPECT_EQ((*listed)["report"], "out/probe-report/report.html");
}

// A run whose token data are ids made elsewhere has no tokenizer to read text with: probe --text is refused in one
// sentence that says what to do; --token-ids reads ids instead, even where the run's own validation split (2 ids here)
// is too short for one window; an unknown analysis is refused listing the table.
TEST(Import, ProbeTextWithoutTheRunsTokenizerIsRefused) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("import_probe_ids");
  const fs::path dir = copy_of("llama", tmp), run = tmp / "run", ids = tmp / "ids.txt", text = tmp / "text.txt";
  std::string id_text;
  for (int i = 0; i < 400; ++i) id_text += std::to_string((i * 37) % 120) + " ";
  spit(ids, id_text);
  spit(tmp / "few.txt", id_text.substr(0, id_text.find(' ', 100)));
  spit(text, tiny_corpus_text());
  const CliResult imported =
      run_cli({"import", dir.string(), "--out", run.string(), "--token-ids", (tmp / "few.txt").string()}, tmp.path());
  ASSERT_EQ(imported.exit_code, 0) << describe(imported);
  const auto probe = [&](const std::string& analyses, const std::string& flag, const fs::path& file) {
    return run_cli(
        {"probe", "--run", run.string(), "--analysis", analyses, flag, file.string(), "--out", (tmp / "out").string()},
        tmp.path());
  };
  expect_cli_error(probe("logit-lens", "--text", text),
                   {"--text: the run's token data " + (run / "data").string() + " has no tokenizer",
                    "give the text's ids, made by the model's own tokenizer, with --token-ids FILE",
                    "import the checkpoint again with --text"});
  const CliResult r = run_cli({"probe", "--run", run.string(), "--analysis", "logit-lens,massive-activations",
                               "--token-ids", ids.string(), "--out", (tmp / "out").string(), "--no-report"},
                              tmp.path());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_FALSE(analysis_results(tmp / "out" / "analysis.jsonl")["massive-activations"].contains("token"));
  EXPECT_FALSE(fs::exists(tmp / "out" / "probe-report"));
  expect_cli_error(probe("logit-lens,lens", "--token-ids", ids), {"unknown analysis 'lens'", "massive-activations",
                                                                  "logit-lens", "angular (also: angular-distance)"});
}

}  // namespace
}  // namespace normlab::train::testing
