// tools/to_torch.py: a run's checkpoint, or its export (`normlab export`), loaded into PyTorch computes normlab's
// logits, both in the independent reference's module for its config and in PyTorch's own torch.nn.Transformer and
// torch.nn.TransformerEncoder. Needs Debian's python3-torch, which scripts/test.sh installs (scripts/setup.sh
// --with-torch): without it these tests fail and say so, so that no run of the suite passes without them.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "train/tiny_corpus.h"

namespace normlab::train::testing {
namespace {

// `to_torch.py PATH --check LOGITS`, PATH a run or an export; nn: in torch.nn.Transformer* (--nn).
CliResult check_logits(const fs::path& path, const fs::path& logits, const fs::path& scratch, bool nn = false) {
  return run_captured("/usr/bin/python3 " + shell_quote(NORMLAB_SOURCE_DIR "/tools/to_torch.py") + " " +
                          shell_quote(path.string()) + (nn ? " --nn" : "") + " --check " + shell_quote(logits.string()),
                      scratch);
}

// The relative L2 error `to_torch.py --check` printed; NaN if it printed none.
double printed_error(const CliResult& check) {
  std::smatch m;
  return std::regex_search(check.out, m, std::regex(R"(relative L2 error ([0-9.eE+-]+))")) ? std::stod(m[1].str())
                                                                                           : NAN;
}

// Trains with `train_args` into `run`, then writes its first evaluation batch and logits to `logits`; false (with
// the failing command's output reported) if either command fails.
bool train_and_dump_logits(const std::vector<std::string>& train_args, const fs::path& run, const fs::path& logits,
                           const fs::path& scratch) {
  for (const auto& args : {train_args, std::vector<std::string>{"eval", "--run", run.string(), "--batches", "1",
                                                                "--logits", logits.string()}}) {
    const CliResult r = run_cli(args, scratch);
    if (r.exit_code != 0) {
      ADD_FAILURE() << describe(r);
      return false;
    }
  }
  return true;
}

TEST(ToTorch, ACheckpointLoadedIntoPyTorchGivesNormlabsLogits) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("to_torch");
  const std::vector<std::vector<std::string>> runs = {
      {},                      // the default Pre-LN model
      {"--preset", "qwen2"},   // RMSNorm, SwiGLU, RoPE, q/k/v biases only
      {"--preset", "gemma2"},  // sandwich, (1 + γ) RMSNorm, soft-caps
      {"--preset", "olmo2"},   // QK-norm, norms on the outputs, an untied head
      {"--set", "model.shape=encoder", "--set", "model.placement=post"}};  // a Post-LN masked LM
  int index = 0;
  for (const auto& extra : runs) {
    const fs::path run = tmp / ("run" + std::to_string(index++));
    std::vector<std::string> args = {"train", "--run", run.string(), "--set", "data.dir=" + tiny_data_dir().string()};
    for (const char* s :
         {"model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.max_seq_len=16",
          "train.seq_len=16", "train.batch_size=4", "train.steps=5", "train.eval_batches=1"})
      args.insert(args.end(), {"--set", s});
    args.insert(args.end(), extra.begin(), extra.end());
    const fs::path logits = tmp / "logits.safetensors";
    ASSERT_TRUE(train_and_dump_logits(args, run, logits, tmp.path()));
    const CliResult check = check_logits(run, logits, tmp.path());
    EXPECT_EQ(check.exit_code, 0) << describe(check);
    EXPECT_NE(check.out.find("relative L2 error"), std::string::npos) << describe(check);
    std::cout << run.filename().string() << ": relative L2 error " << printed_error(check) << "\n";
  }
}

// An encoder-decoder (DeepNorm, N = 3 encoder and M = 2 decoder layers, label smoothing 0.1) trained on the toy
// parallel corpus: the file `eval --logits` writes holds the batch's source and source lengths, and the PyTorch
// module given them computes normlab's logits. Tampering with either makes the check fail, so the source and its
// padding mask are compared too.
TEST(ToTorch, AnEncoderDecoderCheckpointGivesNormlabsLogitsFromTheSource) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("to_torch_encdec");
  const fs::path run = tmp / "run";
  std::vector<std::string> args = {"train", "--run", run.string(), "--set", "data.dir=" + tiny_pairs_dir().string()};
  for (const char* s :
       {"model.shape=encoder_decoder", "model.placement=deepnorm", "model.encoder_layers=3", "model.n_layers=2",
        "model.label_smoothing=0.1", "model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.max_seq_len=16",
        "train.seq_len=16", "train.batch_size=4", "train.steps=5", "train.eval_batches=1", "train.bleu_pairs=4"})
    args.insert(args.end(), {"--set", s});
  const fs::path logits = tmp / "logits.safetensors";
  ASSERT_TRUE(train_and_dump_logits(args, run, logits, tmp.path()));

  const io::SafetensorsFile file = io::SafetensorsFile::read(logits);
  const std::vector<int32_t> source = file.at("source").copy_as<int32_t>();
  const std::vector<int32_t> lengths = file.at("source_lengths").copy_as<int32_t>();
  ASSERT_EQ(file.at("source").shape, (std::vector<int64_t>{4, 16}));
  ASSERT_EQ(file.at("source_lengths").shape, (std::vector<int64_t>{4}));
  for (int32_t n : lengths) EXPECT_TRUE(n >= 2 && n <= 16) << n;  // 2-6 words and the EOS

  const CliResult check = check_logits(run, logits, tmp.path());
  EXPECT_EQ(check.exit_code, 0) << describe(check);
  EXPECT_NE(check.out.find("encoder_decoder (3 encoder, 2 decoder layers)"), std::string::npos) << describe(check);
  const double error = printed_error(check);
  EXPECT_LE(error, 1e-5) << describe(check);  // to_torch.py's tolerance, as for the one-stack models
  std::cout << "encoder-decoder: relative L2 error " << error << "\n";

  // The same file with one thing changed: the check must fail (exit status 1) and say by how much.
  const auto tampered = [&](const std::string& what, const std::vector<int32_t>& src, const std::vector<int32_t>& len) {
    const fs::path path = tmp / ("tampered_" + what + ".safetensors");
    std::vector<io::TensorToWrite> tensors;
    for (const io::SafetensorsFile::Entry& e : file.entries())
      tensors.push_back({e.name, e.dtype, e.shape,
                         e.name == "source"           ? static_cast<const void*>(src.data())
                         : e.name == "source_lengths" ? static_cast<const void*>(len.data())
                                                      : static_cast<const void*>(e.data.data())});
    io::write_safetensors(path, tensors, file.metadata());
    const CliResult bad = check_logits(run, path, tmp.path());
    EXPECT_EQ(bad.exit_code, 1) << what << "\n" << describe(bad);
    EXPECT_GT(printed_error(bad), 1e-5) << what << "\n" << describe(bad);
  };
  std::vector<int32_t> shorter = lengths;
  for (int32_t& n : shorter) n -= 1;  // each row's EOS masked out as if it were padding
  tampered("source_lengths", source, shorter);
  std::vector<int32_t> other = source;
  const auto vocab = static_cast<int32_t>(file.at("logits").shape[2]);
  other[0] = (other[0] + 1) % vocab;  // another first source word in row 0
  tampered("source", other, lengths);
}

// The tiny training arguments of the torch.nn oracle tests: `shape` with Vaswani's ReLU and sinusoids (and √d), 5
// steps on the toy corpus of its shape.
std::vector<std::string> vaswani_style_run(const fs::path& run, const std::string& shape,
                                           const std::string& placement) {
  const bool pairs = shape == "encoder_decoder";
  std::vector<std::string> args = {"train", "--run", run.string(), "--set",
                                   "data.dir=" + (pairs ? tiny_pairs_dir() : tiny_data_dir()).string()};
  for (const std::string& s :
       {"model.shape=" + shape, "model.placement=" + placement, std::string("model.activation=relu"),
        std::string("model.positions=sinusoidal"), std::string("model.embed_scale=sqrt_d"),
        std::string("model.d_model=32"), std::string("model.n_heads=2"), std::string("model.d_ff=64"),
        std::string("model.max_seq_len=16"), std::string("train.seq_len=16"), std::string("train.batch_size=4"),
        std::string("train.steps=5"), std::string("train.eval_batches=1")})
    args.insert(args.end(), {"--set", s});
  const std::vector<std::string> depth =
      pairs ? std::vector<std::string>{"model.encoder_layers=3", "model.n_layers=2", "model.label_smoothing=0.1",
                                       "train.bleu_pairs=4"}
            : std::vector<std::string>{"model.n_layers=2"};
  for (const std::string& s : depth) args.insert(args.end(), {"--set", s});
  return args;
}

// Trains a model of `shape` under Post-LN and under Pre-LN, exports it, deletes the run, and checks the export alone
// in PyTorch's own modules (`to_torch.py EXPORT --nn`, norm_first false / true) and in the reference's equations
// against normlab's logits. The same export with another activation must fail the check: the comparison can fail.
void expect_torch_nn_matches(const std::string& shape, const std::string& torch_module) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("to_torch_nn");
  for (const std::string placement : {"post", "pre"}) {
    const fs::path run = tmp / ("run_" + placement), exported = tmp / ("export_" + placement);
    const fs::path logits = tmp / ("logits_" + placement + ".safetensors");
    ASSERT_TRUE(train_and_dump_logits(vaswani_style_run(run, shape, placement), run, logits, tmp.path()));
    const CliResult e = run_cli({"export", "--run", run.string(), "--out", exported.string()}, tmp.path());
    ASSERT_EQ(e.exit_code, 0) << describe(e);
    fs::remove_all(run);  // the export is all the loaders get

    const CliResult nn = check_logits(exported, logits, tmp.path(), true);
    EXPECT_EQ(nn.exit_code, 0) << placement << "\n" << describe(nn);
    EXPECT_NE(nn.out.find(torch_module), std::string::npos) << describe(nn);
    const double error = printed_error(nn);
    EXPECT_LE(error, 1e-5) << placement << "\n" << describe(nn);
    std::cout << shape << " " << placement << " in " << torch_module << ": relative L2 error " << error << "\n";
    const CliResult reference = check_logits(exported, logits, tmp.path());
    EXPECT_EQ(reference.exit_code, 0) << placement << "\n" << describe(reference);

    Json config = Json::parse(slurp(exported / "config.json"));
    config["model"]["activation"] = "gelu";
    spit(exported / "config.json", config.dump(2));
    const CliResult wrong = check_logits(exported, logits, tmp.path(), true);
    EXPECT_EQ(wrong.exit_code, 1) << "GELU instead of ReLU went unnoticed\n" << describe(wrong);
    EXPECT_GT(printed_error(wrong), 1e-5) << describe(wrong);
  }
}

// Issue 47.5: an export carries a checksum of its tensors (data_crc32), and to_torch.py refuses an export whose
// tensors do not match it, or that has none, with one line rather than loading flipped weights silently.
TEST(ToTorch, ATamperedExportFailsToLoadWithAMessage) {
  ASSERT_TRUE(torch_available()) << kNoTorch;
  TempDir tmp("to_torch_tampered");
  const fs::path run = tmp / "run", exported = tmp / "export";
  std::vector<std::string> args = {"train", "--run", run.string(), "--set", "data.dir=" + tiny_data_dir().string()};
  for (const char* s : {"model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64",
                        "model.max_seq_len=16", "train.seq_len=16", "train.batch_size=4", "train.steps=2"})
    args.insert(args.end(), {"--set", s});
  ASSERT_EQ(run_cli(args, tmp.path()).exit_code, 0);
  ASSERT_EQ(run_cli({"export", "--run", run.string(), "--out", exported.string()}, tmp.path()).exit_code, 0);
  const auto load = [&] {
    return run_captured("/usr/bin/python3 " + shell_quote(NORMLAB_SOURCE_DIR "/tools/to_torch.py") + " " +
                            shell_quote(exported.string()),
                        tmp.path());
  };
  const CliResult fine = load();
  ASSERT_EQ(fine.exit_code, 0) << describe(fine);

  const fs::path file = exported / "model.safetensors";
  const std::string original = slurp(file);
  std::string flipped = original;
  flipped[flipped.size() - 3] = static_cast<char>(flipped[flipped.size() - 3] ^ 0x10);  // in the last tensor's data
  spit(file, flipped);
  const CliResult tampered = load();
  EXPECT_EQ(tampered.exit_code, 1) << describe(tampered);
  EXPECT_NE(tampered.err.find("model.safetensors: the tensors do not match the checksum in its metadata"),
            std::string::npos)
      << describe(tampered);
  EXPECT_EQ(tampered.err.find("Traceback"), std::string::npos) << describe(tampered);

  // Without the checksum: rewritten with the same tensors and only the format in its metadata.
  spit(file, original);
  const io::SafetensorsFile f = io::SafetensorsFile::read(file);
  std::vector<io::TensorToWrite> tensors;
  for (const auto& e : f.entries()) tensors.push_back({e.name, e.dtype, e.shape, e.data.data()});
  io::write_safetensors(file, tensors, {{"format", f.metadata().at("format")}});
  const CliResult unchecked = load();
  EXPECT_EQ(unchecked.exit_code, 1) << describe(unchecked);
  EXPECT_NE(unchecked.err.find("data_crc32 missing"), std::string::npos) << describe(unchecked);
}

TEST(ToTorch, ExportedPostAndPreLnEncoderDecodersGiveNormlabsLogitsInTorchNnTransformer) {
  expect_torch_nn_matches("encoder_decoder", "torch.nn.Transformer");
}

TEST(ToTorch, ExportedPostAndPreLnEncodersGiveNormlabsLogitsInTorchNnTransformerEncoder) {
  expect_torch_nn_matches("encoder", "torch.nn.TransformerEncoder");
}

}  // namespace
}  // namespace normlab::train::testing
