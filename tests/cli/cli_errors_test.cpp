// Bad input through the normlab binary: every case is one "normlab: error: ..." line naming the
// file or field at fault, exit status 1, no crash, and nothing deleted.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <limits>
#include <map>

#include "io/safetensors.h"
#include "train/checkpoint.h"
#include "train/tiny_corpus.h"
#include "train/trainer.h"

namespace normlab::cli {
namespace {

using train::testing::CliResult;
using train::testing::describe;
using train::testing::expect_cli_error;
using train::testing::slurp;
using train::testing::spit;
using train::testing::TempDir;
using train::testing::tiny_config;
using train::testing::tiny_config_doc;
using train::testing::tiny_data_dir;
namespace fs = std::filesystem;

// Every file under `dir` with its bytes.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = slurp(e.path());
  return out;
}

class CliErrors : public ::testing::Test {
 protected:
  // One finished 3-step run, shared; each test works on its own copy.
  static void SetUpTestSuite() {
    shared_ = std::make_unique<TempDir>("cli_errors");
    train::Trainer t(tiny_config(3), *shared_ / "run", {false, -1, nullptr});
    t.run();
    spit(*shared_ / "config.json", tiny_config_doc(3).dump(2));
  }
  static void TearDownTestSuite() { shared_.reset(); }

  fs::path copy_run(const std::string& name = "run") {
    const fs::path dir = tmp_ / name;
    fs::copy(*shared_ / "run", dir, fs::copy_options::recursive);
    return dir;
  }
  CliResult cli(const std::vector<std::string>& args) { return train::testing::run_cli(args, tmp_.path()); }
  // `train` with the tiny config and some --set overrides, into a fresh run directory.
  CliResult train_with(const std::vector<std::string>& sets) {
    std::vector<std::string> args = {"train", "-c", config().string(), "--run", (tmp_ / "new_run").string()};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    return cli(args);
  }
  static fs::path config() { return *shared_ / "config.json"; }
  fs::path write_config(const Json& doc) {
    const fs::path p = tmp_ / "bad_config.json";
    spit(p, doc.dump(2));
    return p;
  }

  // eval and train --resume on a damaged run both fail with every fragment, and change nothing.
  void expect_damaged_run_refused(const fs::path& run, std::initializer_list<std::string_view> fragments) {
    const auto before = snapshot(run);
    {
      SCOPED_TRACE("normlab eval");
      expect_cli_error(cli({"eval", "--run", run.string(), "--batches", "1"}), fragments);
    }
    {
      SCOPED_TRACE("normlab train --resume");
      expect_cli_error(cli({"train", "--run", run.string(), "--resume"}), fragments);
    }
    {
      SCOPED_TRACE("normlab generate");
      expect_cli_error(cli({"generate", "--run", run.string(), "-n", "2"}), fragments);
    }
    EXPECT_EQ(snapshot(run), before) << "a refused command changed the run directory";
  }

  TempDir tmp_{"cli_errors_case"};
  static std::unique_ptr<TempDir> shared_;
};
std::unique_ptr<TempDir> CliErrors::shared_;

// --- prepare ---

TEST_F(CliErrors, PrepareMissingCorpusFile) {
  const std::string missing = (tmp_ / "no_such_corpus.txt").string();
  expect_cli_error(cli({"prepare", "-i", missing, "-o", (tmp_ / "out").string()}), {missing, "does not exist"});
  EXPECT_FALSE(fs::exists(tmp_ / "out" / "meta.json"));
}

TEST_F(CliErrors, PrepareEmptyCorpusFile) {
  spit(tmp_ / "empty.txt", "");
  spit(tmp_ / "blank.txt", "\n   \n\t\n");
  for (const char* name : {"empty.txt", "blank.txt"}) {
    SCOPED_TRACE(name);
    const std::string file = (tmp_ / name).string();
    expect_cli_error(cli({"prepare", "-i", file, "-o", (tmp_ / "out").string()}), {file, "empty"});
  }
  EXPECT_FALSE(fs::exists(tmp_ / "out" / "meta.json"));
}

// Issue 47.8: prepare's messages. A vocabulary too small for the text's characters gets SentencePiece's own advice
// (raise it), not "lower --vocab-size"; a damaged --pairs line is quoted without its raw control bytes; an --out that
// is a file is refused before the tokenizer is trained.
TEST_F(CliErrors, PrepareMessagesAgreeWithSentencePieceAndTheTerminal) {
  std::string text;
  for (char c = 'a'; c <= 'z'; ++c)
    text += fmt::format("{} {}\n", std::string(3, c), std::string(2, static_cast<char>(c - 32)));
  spit(tmp_ / "letters.txt", text);
  const CliResult small =
      cli({"prepare", "-i", (tmp_ / "letters.txt").string(), "-o", (tmp_ / "small").string(), "--vocab-size", "8"});
  expect_cli_error(small, {"vocab_size 8", "raise --vocab-size"});
  EXPECT_EQ(small.err.find("lower --vocab-size"), std::string::npos) << small.err;

  spit(tmp_ / "pairs.tsv", "a\tb\nno tab \x1b[31m here\x07\n");
  const CliResult pairs =
      cli({"prepare", "--pairs", "-i", (tmp_ / "pairs.tsv").string(), "-o", (tmp_ / "pairs").string()});
  expect_cli_error(pairs, {"line 2 has 1 tab-separated fields", "'no tab ?[31m here?'"});
  EXPECT_EQ(pairs.err.find('\x1b'), std::string::npos) << pairs.err;

  spit(tmp_ / "a_file", "x");
  for (const fs::path& out : {tmp_ / "a_file", tmp_ / "a_file" / "under"}) {
    const CliResult r = cli({"prepare", "-i", (tmp_ / "letters.txt").string(), "-o", out.string()});
    expect_cli_error(r, {fmt::format("--out {}", out.string()),
                         fmt::format("{} is a file, not a folder", (tmp_ / "a_file").string())});
    EXPECT_EQ(r.err.find("training a"), std::string::npos) << "the tokenizer was trained first\n" << r.err;
  }
}

// --- damaged checkpoints ---

TEST_F(CliErrors, TruncatedCheckpoint) {
  const fs::path run = copy_run();
  const std::string bytes = slurp(run / train::kCheckpointFile);
  spit(run / train::kCheckpointFile, bytes.substr(0, bytes.size() / 2));
  expect_damaged_run_refused(run, {train::kCheckpointFile, "truncated"});

  spit(run / train::kCheckpointFile, bytes.substr(0, 5));  // not even the header length
  expect_damaged_run_refused(run, {train::kCheckpointFile, "truncated"});
}

struct Header {
  std::string bytes;
  size_t begin = 8, end = 0;  // the JSON header is bytes[begin, end)
  explicit Header(std::string b) : bytes(std::move(b)) {
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);  // little-endian host
    end = begin + static_cast<size_t>(n);
  }
  size_t find(std::string_view s) const {
    const size_t at = bytes.find(s, begin);
    EXPECT_LT(at, end) << "'" << s << "' not in the header";
    return at;
  }
};

TEST_F(CliErrors, CorruptedCheckpointHeaderNotJson) {
  const fs::path run = copy_run();
  Header h(slurp(run / train::kCheckpointFile));
  h.bytes[h.begin] = 'X';  // the opening '{'
  h.bytes[h.begin + 20] ^= 0x5a;
  spit(run / train::kCheckpointFile, h.bytes);
  expect_damaged_run_refused(run, {train::kCheckpointFile, "damaged header"});
}

TEST_F(CliErrors, CorruptedCheckpointHeaderTensorName) {
  const fs::path run = copy_run();
  Header h(slurp(run / train::kCheckpointFile));
  const size_t at = h.find("\"embed.tokens.weight\"");  // the weight, not optim.m.embed.tokens.weight
  h.bytes[at + 1] = 'E';
  spit(run / train::kCheckpointFile, h.bytes);
  // The renamed tensor moves in the checksum's name order, so the checksum catches it first.
  expect_damaged_run_refused(run, {train::kCheckpointFile, "corrupted"});
}

TEST_F(CliErrors, CorruptedCheckpointHeaderOffsets) {
  const fs::path run = copy_run();
  Header h(slurp(run / train::kCheckpointFile));
  const size_t offsets = h.find("\"data_offsets\":[");
  const size_t comma = h.bytes.find(',', offsets);
  char& digit = h.bytes[comma + 1];  // first digit of the end offset
  ASSERT_TRUE(digit >= '1' && digit <= '9') << h.bytes.substr(offsets, 40);
  digit = digit == '9' ? '1' : static_cast<char>(digit + 1);
  spit(run / train::kCheckpointFile, h.bytes);
  expect_damaged_run_refused(run, {train::kCheckpointFile, "data_offsets"});
}

TEST_F(CliErrors, CorruptedCheckpointFormatTag) {
  const fs::path run = copy_run();
  Header h(slurp(run / train::kCheckpointFile));
  const size_t at = h.find("normlab-checkpoint-v2");
  h.bytes[at + std::strlen("normlab-checkpoint-v")] = '9';
  spit(run / train::kCheckpointFile, h.bytes);
  expect_damaged_run_refused(run, {train::kCheckpointFile, "not a normlab checkpoint"});
}

// Flipped bytes in the weights are caught by the checksum in the metadata (data_fnv1a64).
TEST_F(CliErrors, CorruptedCheckpointData) {
  const fs::path run = copy_run();
  Header h(slurp(run / train::kCheckpointFile));
  const size_t data = (h.end + h.bytes.size()) / 2;
  for (size_t i = 0; i < 16; ++i) h.bytes[data + i] = static_cast<char>(h.bytes[data + i] ^ 0xff);
  spit(run / train::kCheckpointFile, h.bytes);
  expect_damaged_run_refused(run, {train::kCheckpointFile, "corrupt"});
}

TEST_F(CliErrors, MissingCheckpoint) {
  const fs::path run = copy_run();
  fs::remove(run / train::kCheckpointFile);
  expect_cli_error(cli({"eval", "--run", run.string()}), {train::kCheckpointFile, "does not exist"});
  expect_cli_error(cli({"train", "--run", run.string(), "--resume"}), {"cannot resume", train::kCheckpointFile});
}

// --- configs ---

TEST_F(CliErrors, ConfigUnknownKey) {
  Json doc = tiny_config_doc(3);
  doc["model"]["d_moddel"] = 64;
  const fs::path file = write_config(doc);
  expect_cli_error(cli({"train", "-c", file.string(), "--run", (tmp_ / "r").string()}),
                   {file.string(), "model", "unknown key 'd_moddel'"});
  expect_cli_error(train_with({"model.d_moddel=64"}), {"unknown key 'd_moddel'", "--set"});
  expect_cli_error(train_with({"train.learning_rate=1e-3"}), {"train", "unknown key 'learning_rate'"});
  EXPECT_FALSE(fs::exists(tmp_ / "r"));
  EXPECT_FALSE(fs::exists(tmp_ / "new_run"));
}

TEST_F(CliErrors, ConfigWrongType) {
  Json doc = tiny_config_doc(3);
  doc["model"]["n_layers"] = "six";
  const fs::path file = write_config(doc);
  expect_cli_error(cli({"train", "-c", file.string(), "--run", (tmp_ / "r").string()}),
                   {file.string(), "n_layers", "expected an integer", "six"});
  expect_cli_error(train_with({"model.n_layers=six"}), {"model.n_layers", "expected an integer"});
  expect_cli_error(train_with({"train.lr=fast"}), {"train.lr", "expected a number"});
  expect_cli_error(train_with({"model.tied_embeddings=1"}), {"model.tied_embeddings", "true or false"});
}

TEST_F(CliErrors, ConfigNotJson) {
  spit(tmp_ / "broken.json", "{\"model\": {\"d_model\": 32,}");
  const std::string file = (tmp_ / "broken.json").string();
  expect_cli_error(cli({"train", "-c", file, "--run", (tmp_ / "r").string()}), {file, "not valid JSON"});
  expect_cli_error(cli({"train", "-c", (tmp_ / "absent.json").string(), "--run", (tmp_ / "r").string()}),
                   {"absent.json", "does not exist"});
}

TEST_F(CliErrors, ConfigImpossibleValues) {
  expect_cli_error(train_with({"model.n_heads=3"}), {"n_heads = 3 does not divide d_model = 32"});
  expect_cli_error(train_with({"train.seq_len=32"}), {"train.seq_len = 32", "model.max_seq_len = 16"});
  expect_cli_error(train_with({"train.lr=-0.001"}), {"train.lr", "out of range"});
  expect_cli_error(train_with({"train.batch_size=0"}), {"train.batch_size", "out of range"});
  expect_cli_error(train_with({"model.dropout=1.5"}), {"model.dropout", "out of range"});
  expect_cli_error(train_with({"train.schedule=exponential"}), {"train.schedule", "exponential"});
  EXPECT_FALSE(fs::exists(tmp_ / "new_run"));
}

TEST_F(CliErrors, UnknownPlacement) { expect_cli_error(train_with({"model.placement=prex"}), {"placement", "'prex'"}); }

// --- token data ---

TEST_F(CliErrors, ModelVocabDiffersFromData) {
  expect_cli_error(train_with({"model.vocab_size=100"}), {"model.vocab_size = 100", tiny_data_dir().string()});
}

TEST_F(CliErrors, MetaVocabSmallerThanTokenIds) {
  const fs::path data = tmp_ / "tokens";
  fs::copy(tiny_data_dir(), data, fs::copy_options::recursive);
  Json meta = Json::parse(slurp(data / "meta.json"));
  meta["vocab_size"] = 10;
  spit(data / "meta.json", meta.dump(2));
  expect_cli_error(train_with({"data.dir=\"" + data.string() + "\""}), {"train.bin", "holds id", "10 entries"});
}

TEST_F(CliErrors, MissingDataDir) {
  const std::string dir = (tmp_ / "no_such_tokens").string();
  expect_cli_error(train_with({"data.dir=" + dir}), {dir, "does not exist", "normlab prepare"});
  EXPECT_FALSE(fs::exists(tmp_ / "new_run"));
  fs::create_directories(dir);  // a directory without meta.json: an unfinished prepare
  expect_cli_error(train_with({"data.dir=" + dir}), {"meta.json", "normlab prepare"});
}

// --- run directories ---

TEST_F(CliErrors, ResumeWithOverridesIsRefused) {
  const fs::path run = copy_run();
  const auto before = snapshot(run);
  expect_cli_error(cli({"train", "--run", run.string(), "--resume", "--set", "train.lr=1"}), {"--resume", "--set"});
  expect_cli_error(cli({"train", "--run", run.string(), "--resume", "-c", config().string()}),
                   {"--resume", "--config"});
  EXPECT_EQ(snapshot(run), before);
}

TEST_F(CliErrors, NewRunOverAnExistingCheckpointIsRefused) {
  const fs::path run = copy_run();
  const auto before = snapshot(run);
  ASSERT_TRUE(before.contains("checkpoint.safetensors"));
  ASSERT_TRUE(before.contains("metrics.jsonl"));
  ASSERT_TRUE(before.contains("summary.json"));
  expect_cli_error(cli({"train", "-c", config().string(), "--run", run.string()}),
                   {run.string(), "already holds a checkpoint", "--resume"});
  // Even with a different config, nothing is rewritten or removed.
  expect_cli_error(cli({"train", "-c", config().string(), "--set", "train.steps=9", "--run", run.string()}),
                   {"already holds a checkpoint"});
  EXPECT_EQ(snapshot(run), before);
}

TEST_F(CliErrors, EvalOfAMissingRunDirectory) {
  const std::string run = (tmp_ / "never_trained").string();
  expect_cli_error(cli({"eval", "--run", run}), {run, "does not exist"});
  expect_cli_error(cli({"generate", "--run", run}), {run, "does not exist"});
}

// A checkpoint whose weights hold a NaN evaluates to a non-finite loss: eval refuses to print it as a result,
// names the run and says what to do.
TEST_F(CliErrors, EvalRefusesANonFiniteLoss) {
  const fs::path run = copy_run();
  const fs::path file = run / train::kCheckpointFile;
  const auto ckpt = io::SafetensorsFile::read(file);
  std::vector<std::vector<std::byte>> copies;
  copies.reserve(ckpt.entries().size());
  std::vector<io::TensorToWrite> tensors;
  bool poisoned = false;
  for (const auto& e : ckpt.entries()) {
    copies.emplace_back(e.data.begin(), e.data.end());
    if (!poisoned && e.dtype == io::Dtype::F32 && !e.name.starts_with("optim.") && e.numel() > 0) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      for (std::size_t i = 0; i + sizeof(float) <= copies.back().size(); i += sizeof(float))
        std::memcpy(copies.back().data() + i, &nan, sizeof(float));
      poisoned = true;
    }
    tensors.push_back({e.name, e.dtype, e.shape, copies.back().data()});
  }
  ASSERT_TRUE(poisoned);
  auto metadata = ckpt.metadata();
  metadata["data_fnv1a64"] = train::data_checksum(tensors);  // a consistent checkpoint, only its weights diverged
  metadata["metadata_fnv1a64"] = train::metadata_checksum(metadata);
  io::write_safetensors(file, tensors, metadata);
  expect_cli_error(cli({"eval", "--run", run.string(), "--batches", "1"}),
                   {run.string(), "not a number", "lower train.lr"});
}

// Rewrites the checkpoint of `run` with its metadata entry `key` set to `value` (or removed, when empty), and the
// metadata checksum recomputed when `consistent`, else left as it was.
void edit_checkpoint_metadata(const fs::path& run, const std::string& key, const std::string& value, bool consistent) {
  const fs::path file = run / train::kCheckpointFile;
  const auto ckpt = io::SafetensorsFile::read(file);
  std::vector<std::vector<std::byte>> copies;
  copies.reserve(ckpt.entries().size());
  std::vector<io::TensorToWrite> tensors;
  for (const auto& e : ckpt.entries()) {
    copies.emplace_back(e.data.begin(), e.data.end());
    tensors.push_back({e.name, e.dtype, e.shape, copies.back().data()});
  }
  auto metadata = ckpt.metadata();
  if (value.empty()) metadata.erase(key);
  else metadata[key] = value;
  if (consistent) metadata["metadata_fnv1a64"] = train::metadata_checksum(metadata);
  io::write_safetensors(file, tensors, metadata);
}

// An edited step in the checkpoint's metadata (issue 35.3): caught by the metadata checksum, and, in a checkpoint
// whose checksum agrees (or one written before the checksum existed), by the range of the run's steps.
TEST_F(CliErrors, TamperedCheckpointStep) {
  int copy = 0;
  for (const std::string step : {"-5", "1000000", "0", "2x"}) {
    SCOPED_TRACE(step);
    fs::path run = copy_run(fmt::format("run{}", copy++));
    edit_checkpoint_metadata(run, "step", step, false);
    expect_damaged_run_refused(run, {train::kCheckpointFile, "its metadata", "checksum"});
    const std::string named = step == "2x" ? "metadata.step '2x' is not a whole number"
                                           : fmt::format("metadata.step {} is outside the run's steps 1..3", step);
    run = copy_run(fmt::format("run{}", copy++));
    edit_checkpoint_metadata(run, "step", step, true);
    expect_damaged_run_refused(run, {train::kCheckpointFile, named});
    run = copy_run(fmt::format("run{}", copy++));
    edit_checkpoint_metadata(run, "format", "normlab-checkpoint-v1", false);  // as an older normlab wrote it
    edit_checkpoint_metadata(run, "metadata_fnv1a64", "", false);
    edit_checkpoint_metadata(run, "step", step, false);
    expect_damaged_run_refused(run, {train::kCheckpointFile, named});
  }
  // The config is covered too.
  const fs::path run = copy_run("config_edited");
  auto config = Json::parse(io::SafetensorsFile::read(run / train::kCheckpointFile).metadata().at("config"));
  config["train"]["lr"] = 0.5;
  edit_checkpoint_metadata(run, "config", config.dump(), false);
  expect_damaged_run_refused(run, {train::kCheckpointFile, "checksum"});
}

// Issue 47.5: a checkpoint may lack metadata_fnv1a64 only where its format says it was written before the checksum
// existed (v1). Deleting the checksum from a current (v2) checkpoint, its step edited or not, is refused; a v1
// checkpoint without one still loads.
TEST_F(CliErrors, AMissingMetadataChecksumIsExcusedOnlyByTheOldFormat) {
  fs::path run = copy_run("no_checksum");
  edit_checkpoint_metadata(run, "metadata_fnv1a64", "", false);
  expect_damaged_run_refused(run, {train::kCheckpointFile, "metadata.metadata_fnv1a64 is missing",
                                   "its format normlab-checkpoint-v2 always has it"});
  run = copy_run("no_checksum_step_edited");
  edit_checkpoint_metadata(run, "metadata_fnv1a64", "", false);
  edit_checkpoint_metadata(run, "step", "2", false);
  expect_damaged_run_refused(run, {train::kCheckpointFile, "metadata.metadata_fnv1a64 is missing"});
  run = copy_run("v1");
  edit_checkpoint_metadata(run, "format", "normlab-checkpoint-v1", false);
  edit_checkpoint_metadata(run, "metadata_fnv1a64", "", false);
  const CliResult eval = cli({"eval", "--run", run.string(), "--batches", "1"});
  EXPECT_EQ(eval.exit_code, 0) << describe(eval);
  EXPECT_NE(eval.out.find("step 3: validation loss"), std::string::npos) << describe(eval);
}

// --- enumerated switches and config files (issue 35.2) ---

TEST_F(CliErrors, EnumeratedSwitchesTakeOnlyTheirValues) {
  expect_cli_error(train_with({"model.options.qk_norm=Full"}),
                   {"model.options.qk_norm", "'Full' is not one of: none, full, per_head, l2"});
  expect_cli_error(train_with({"model.options.qk_norm=yes"}), {"model.options.qk_norm", "'yes'"});
  expect_cli_error(train_with({"model.placement=lns", "model.options.lns_form=bogus"}),
                   {"model.options.lns_form", "'bogus' is not one of: constant, gain_init"});
  expect_cli_error(train_with({"model.placement=normformer", "model.options.head_scale=bogus"}),
                   {"model.options.head_scale", "'bogus' is not one of: paper, fairseq"});
  expect_cli_error(train_with({"model.placement=admin", "model.options.admin_omega=Log"}),
                   {"model.options.admin_omega", "log, profile, linear, constant"});
  expect_cli_error(train_with({"model.placement=deepnorm", "model.options.deepnorm_init=bogus"}),
                   {"model.options.deepnorm_init", "paper, torchscale"});
  expect_cli_error(train_with({"model.placement=deepnorm", "model.options.deepnorm_beta=bogus"}),
                   {"model.options.deepnorm_beta", "paper, torchscale"});
  EXPECT_FALSE(fs::exists(tmp_ / "new_run"));
}

// A number past a double's range is a sentence naming the file, not a raw JSON exception (found by fuzz_config).
TEST_F(CliErrors, ConfigWithANumberTooLargeForADouble) {
  const fs::path file = tmp_ / "huge.json";
  spit(file, R"({"train": {"lr": 33E33333333}})");
  expect_cli_error(cli({"train", "-c", file.string(), "--run", (tmp_ / "r").string()}),
                   {file.string(), "a number is too large for a double"});
  EXPECT_FALSE(fs::exists(tmp_ / "r"));
}

TEST_F(CliErrors, ConfigWithADuplicateKey) {
  const fs::path file = tmp_ / "duplicate.json";
  const auto train = [&] { return cli({"train", "-c", file.string(), "--run", (tmp_ / "r").string()}); };
  spit(file, R"({"model": {"d_model": 32, "n_layers": 2, "d_model": 64}})");
  expect_cli_error(train(), {file.string(), "'model.d_model' appears twice"});
  spit(file, R"({"train": {"steps": 3}, "model": {}, "train": {"steps": 5}})");
  expect_cli_error(train(), {file.string(), "'train' appears twice"});
  spit(file, R"({"model": {"options": {"qk_norm": "full", "qk_norm": "none"}}})");
  expect_cli_error(train(), {"'model.options.qk_norm' appears twice"});
  // The same key in two different objects is fine (the config then fails for its own reason, or not at all).
  spit(file, R"({"model": {"norm": {"eps": 1e-5}}, "train": {"eps": 1}})");
  expect_cli_error(train(), {"train", "unknown key 'eps'"});
  EXPECT_FALSE(fs::exists(tmp_ / "r"));
}

// A config or sweep file is read only if it is a regular file below 64 MiB: /dev/zero (endless), a FIFO (no writer)
// and a huge file are refused at once, before anything is read.
TEST_F(CliErrors, ConfigThatIsNotARegularFileOrTooBig) {
  expect_cli_error(cli({"train", "-c", "/dev/zero", "--run", (tmp_ / "r").string()}),
                   {"config file /dev/zero", "not a regular file"});
  expect_cli_error(cli({"sweep", "/dev/zero", "--out", (tmp_ / "s").string()}),
                   {"sweep file /dev/zero", "not a regular file"});
  const fs::path fifo = tmp_ / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  expect_cli_error(cli({"train", "-c", fifo.string(), "--run", (tmp_ / "r").string()}), {"fifo.json", "regular"});
  const fs::path big = tmp_ / "big.json";
  spit(big, "{}");
  fs::resize_file(big, std::uintmax_t{65} << 20);  // sparse
  expect_cli_error(cli({"train", "-c", big.string(), "--run", (tmp_ / "r").string()}), {"big.json", "holds"});
  EXPECT_FALSE(fs::exists(tmp_ / "r"));
  EXPECT_FALSE(fs::exists(tmp_ / "s"));
}

// Issue 47.1: input nested past kMaxNesting (a config, a --set value or key, a formula through --set) is one sentence
// naming where it is, not a stack overflow (exit 139) in a recursive pass over it.
TEST_F(CliErrors, NestingPastTheBoundIsRefused) {
  const fs::path file = tmp_ / "deep.json";
  spit(file, fmt::format("{{\"train\":{}{}}}", std::string(100000, '['), std::string(100000, ']')));
  expect_cli_error(cli({"train", "--run", (tmp_ / "r").string(), "--config", file.string(), "--dry-run"}),
                   {file.string(), "nest 100001 levels deep", fmt::format("more than the {}", kMaxNesting)});
  expect_cli_error(train_with({fmt::format("train.lr={}{}", std::string(50000, '['), std::string(50000, ']'))}),
                   {"override 'train.lr=[[[", "levels deep"});
  std::string key = "a";
  for (int i = 0; i < 5000; ++i) key += ".a";
  expect_cli_error(train_with({fmt::format("{}=1", key)}), {"override 'a.a.a", "levels deep"});
  expect_cli_error(train_with({fmt::format("model.placement=x + branch(norm(x))*{}1", std::string(40000, '-'))}),
                   {"model.placement", "nests deeper than"});
  expect_cli_error(cli({"variants", "check",
                        fmt::format("x + branch(norm(x))*{}1{}", std::string(5000, '('), std::string(5000, ')'))}),
                   {"sublayer", "nests deeper than"});
  EXPECT_FALSE(fs::exists(tmp_ / "r"));
  EXPECT_FALSE(fs::exists(tmp_ / "new_run"));
}

TEST_F(CliErrors, ZeroTrainingSteps) {
  expect_cli_error(train_with({"train.steps=0"}), {"train.steps", "0 is out of range [1,"});
}

// --- the smaller gaps (issue 35.6) ---

TEST_F(CliErrors, GenerateOptionsOutOfRange) {
  const fs::path run = copy_run();
  const auto generate = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"generate", "--run", run.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return cli(args);
  };
  expect_cli_error(generate({"--tokens", "-5"}), {"--tokens -5", "1 or more"});
  expect_cli_error(generate({"--tokens", "0"}), {"--tokens 0"});
  expect_cli_error(generate({"--temperature", "-1"}), {"--temperature -1", "0 (greedy) or a positive number"});
  expect_cli_error(generate({"--temperature", "nan"}), {"--temperature nan"});
  expect_cli_error(generate({"--temperature", "inf"}), {"--temperature inf"});
  expect_cli_error(generate({"--top-k", "-3"}), {"--top-k -3"});
  const auto fine = generate({"--tokens", "2", "--temperature", "0", "--top-k", "0"});
  EXPECT_EQ(fine.exit_code, 0) << describe(fine);
}

// Issue 47.3: counts that would run for hours are refused naming the real limit (eval: the validation split's
// batches, the largest of which still runs), and a long generate shows its progress at each tenth.
TEST_F(CliErrors, GenerateAndEvalCountsAreBoundedAndLongOnesShowProgress) {
  const fs::path run = copy_run();
  expect_cli_error(cli({"generate", "--run", run.string(), "--tokens", "2000000000"}),
                   {"--tokens 2000000000", "at most 1000000", "--prompt"});
  expect_cli_error(cli({"eval", "--run", run.string(), "--batches", "0"}), {"--batches 0", "1 or more"});
  const CliResult many = cli({"eval", "--run", run.string(), "--batches", "2000000000"});
  expect_cli_error(many, {"--batches 2000000000", "the validation split of", "batches of 4 x 16 tokens"});
  const size_t at = many.err.find("give at most ");
  ASSERT_NE(at, std::string::npos) << many.err;
  const std::string most = many.err.substr(at + 13, many.err.find_first_not_of("0123456789", at + 13) - at - 13);
  const CliResult all = cli({"eval", "--run", run.string(), "--batches", most});
  EXPECT_EQ(all.exit_code, 0) << describe(all);
  expect_cli_error(cli({"eval", "--run", run.string(), "--batches", std::to_string(std::stoi(most) + 1)}),
                   {fmt::format("give at most {}", most)});

  const CliResult long_run = cli({"generate", "--run", run.string(), "--tokens", "2000", "--temperature", "0"});
  ASSERT_EQ(long_run.exit_code, 0) << describe(long_run);
  size_t lines = 0;
  for (size_t p = 0; (p = long_run.err.find("generate: ", p)) != std::string::npos; ++p) ++lines;
  EXPECT_EQ(lines, 10u) << long_run.err;
  EXPECT_NE(long_run.err.find("generate: 200 of 2000 (10%)\n"), std::string::npos) << long_run.err;
  EXPECT_NE(long_run.err.find("generate: 2000 of 2000 (100%)\n"), std::string::npos) << long_run.err;
  const CliResult short_run = cli({"generate", "--run", run.string(), "--tokens", "20"});
  ASSERT_EQ(short_run.exit_code, 0) << describe(short_run);
  EXPECT_EQ(short_run.err.find("generate: "), std::string::npos) << short_run.err;
}

// Issue 47.3: a FIFO in place of a run's metrics.jsonl is refused at once instead of blocking train in open().
TEST_F(CliErrors, AFifoInPlaceOfTheMetricsLogIsRefused) {
  const fs::path run = tmp_ / "new_run";
  fs::create_directories(run);
  ASSERT_EQ(::mkfifo((run / "metrics.jsonl").c_str(), 0644), 0);
  expect_cli_error(train_with({}), {(run / "metrics.jsonl").string(), "FIFO", "remove it"});
}

TEST_F(CliErrors, StopAfterMustBeAStep) {
  for (const char* step : {"-5", "0", "-2", "-1"}) {  // -1 too, though it stands for "not given" inside
    SCOPED_TRACE(step);
    expect_cli_error(
        cli({"train", "-c", config().string(), "--run", (tmp_ / "new_run").string(), "--stop-after", step}),
        {fmt::format("--stop-after {}", step), "1 or more"});
  }
  EXPECT_FALSE(fs::exists(tmp_ / "new_run"));
}

// Issue 47.8: options below their range are one sentence of normlab's, not CLI11's "Value 0 not in range 0.000000
// to 1797693...", and an unknown command is named with the commands there are.
TEST_F(CliErrors, OptionsOutOfRangeAndUnknownCommandsAreOneSentence) {
  const fs::path run = copy_run();
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"translate", "--run", run.string(), "--beam", "0"}, {"--beam 0", "1 (greedy search) or more"}},
      {{"translate", "--run", run.string(), "--count", "-1"}, {"--count -1", "or 0 for all"}},
      {{"translate", "--run", run.string(), "--batch", "0"}, {"--batch 0", "1 or more"}},
      {{"eval", "--run", run.string(), "--norm-sample", "0"}, {"--norm-sample 0", "1 (every feature)"}},
      {{"eval", "--run", run.string(), "--attn-top-k", "-1"}, {"--attn-top-k -1", "0 (every key)"}},
      {{"generate", "--run", run.string(), "--norm-sample", "0"}, {"--norm-sample 0"}},
      {{"frobnicate"}, {"unknown command 'frobnicate'", "prepare, train, eval, generate", "normlab --help"}},
  };
  for (const auto& [args, fragments] : cases) {
    SCOPED_TRACE(fmt::format("{} {}", args[0], args.back()));
    const CliResult r = cli(args);
    train::testing::expect_cli_error(r, {});
    for (const std::string& f : fragments) EXPECT_NE(r.err.find(f), std::string::npos) << f << "\n" << r.err;
    EXPECT_EQ(r.err.find("not in range"), std::string::npos) << r.err;
  }
}

// meta.json must agree with its tokenizer: a vocab_size that differs would size the model for another vocabulary,
// an eos_id outside the vocabulary would end sequences with a token that does not exist.
TEST_F(CliErrors, MetaThatDisagreesWithItsTokenizer) {
  const fs::path data = tmp_ / "tokens";
  fs::copy(tiny_data_dir(), data, fs::copy_options::recursive);
  const Json meta = Json::parse(slurp(data / "meta.json"));
  const auto train_on = [&](const Json& edited) {
    spit(data / "meta.json", edited.dump(2));
    return train_with({"data.dir=\"" + data.string() + "\""});
  };
  Json bigger = meta;
  bigger["vocab_size"] = train::testing::kTinyVocab + 8;
  expect_cli_error(train_on(bigger), {"meta.json", fmt::format("vocab_size {}", train::testing::kTinyVocab + 8),
                                      fmt::format("{} pieces", train::testing::kTinyVocab)});
  for (const int eos : {-1, train::testing::kTinyVocab, 100000}) {
    Json edited = meta;
    edited["eos_id"] = eos;
    expect_cli_error(train_on(edited), {"meta.json", fmt::format("eos_id {}", eos), "outside the vocabulary"});
  }
  Json other = meta;
  other["eos_id"] = meta["eos_id"].get<int>() == 0 ? 1 : 0;  // a real id, but not the tokenizer's end of sequence
  expect_cli_error(train_on(other), {"meta.json", "eos_id", "its tokenizer"});
  EXPECT_FALSE(fs::exists(tmp_ / "new_run"));
}

// SentencePiece trains with a character coverage from 0.98 to 1 only: prepare says so up front.
TEST_F(CliErrors, PrepareCharacterCoverageBelowSentencePiecesRange) {
  spit(tmp_ / "corpus.txt", train::testing::tiny_corpus_text(50));
  for (const char* coverage : {"0.5", "0.97", "1.5", "nan"}) {
    SCOPED_TRACE(coverage);
    expect_cli_error(cli({"prepare", "-i", (tmp_ / "corpus.txt").string(), "-o", (tmp_ / "out").string(),
                          "--vocab-size", "60", "--character-coverage", coverage}),
                     {fmt::format("character_coverage {} is out of range", coverage), "from 0.98 to 1"});
  }
  EXPECT_FALSE(fs::exists(tmp_ / "out" / "meta.json"));
}

// A resume over a metrics.jsonl line whose step is not a number, or with missing lines, is refused with a sentence
// naming the file and the line (not a JSON library's type error); a last line cut short is repaired.
TEST_F(CliErrors, ResumeOverDamagedMetrics) {
  const fs::path run = tmp_ / "stopped";
  const auto stop = cli({"train", "-c", config().string(), "--run", run.string(), "--stop-after", "2"});
  ASSERT_EQ(stop.exit_code, 0) << describe(stop);
  const std::string metrics = slurp(run / "metrics.jsonl");
  spit(run / "metrics.jsonl", "{\"step\":\"x\"}\n" + metrics);
  expect_cli_error(cli({"train", "--run", run.string(), "--resume"}),
                   {"metrics.jsonl line 1", "\"step\": \"x\"", "not a whole number"});
  spit(run / "metrics.jsonl", metrics.substr(metrics.find('\n') + 1));  // step 1's train record is gone
  expect_cli_error(cli({"train", "--run", run.string(), "--resume"}),
                   {"metrics.jsonl", "lacks the train record of step 1"});
  spit(run / "metrics.jsonl", metrics + "{\"type\":\"train\",\"step\":3,\"lo");  // a write cut by a kill
  const auto resumed = cli({"train", "--run", run.string(), "--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << describe(resumed);
  EXPECT_EQ(train::testing::train_records(run).size(), 3u);
}

}  // namespace
}  // namespace normlab::cli
