#include "io/corpus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/atomic_file.h"
#include "io/tokenizer.h"
#include "io_test_util.h"

namespace normlab::io {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::slurp;
using testing::spit;
using testing::TempDir;

constexpr int kLines = 400;
constexpr int kVocab = 200;

// Deterministic pseudo-English: words built from syllables, lines of 4..15 words.
std::string generated_text(std::uint64_t seed = 7) {
  static const char* const kSyllables[] = {"the", "an", "lo", "ra",  "mi", "ke", "sto", "ver", "un", "der",
                                           "ing", "al", "po", "tes", "qu", "is", "ba",  "or",  "ne", "ath"};
  std::uint64_t state = seed;
  auto next = [&](std::uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  std::vector<std::string> words;
  for (int i = 0; i < 120; ++i) {
    std::string w;
    for (std::uint64_t s = 0, n = 1 + next(3); s < n; ++s) w += kSyllables[next(20)];
    words.push_back(w);
  }
  std::string text;
  for (int line = 0; line < kLines; ++line) {
    const auto n = 4 + next(12);
    for (std::uint64_t i = 0; i < n; ++i) {
      if (i) text += ' ';
      // Zipf-ish: low indices are much more frequent.
      text += words[next(1 + next(words.size()))];
    }
    text += line % 3 == 0 ? ".\n" : ",\n";
    if (line % 50 == 0) text += "   \n";  // blank lines are skipped
  }
  return text;
}

std::vector<std::string> nonblank_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) out.push_back(line);
  }
  return out;
}

class IoCorpus : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    text_ = generated_text();
    spit(*dir_ / "corpus.txt", text_);
    options_.inputs = {(*dir_ / "corpus.txt").string()};
    options_.out_dir = (*dir_ / "prepared").string();
    options_.vocab_size = kVocab;
    options_.val_fraction = 0.05;
    std::vector<std::string> log;
    summary_ = prepare_corpus(options_, [&](std::string_view line) { log.emplace_back(line); });
    log_ = log;
  }
  static void TearDownTestSuite() { dir_.reset(); }

  // A private copy of the prepared directory to damage.
  static fs::path copy_prepared(const TempDir& into) {
    const fs::path out = into / "copy";
    fs::copy(options_.out_dir, out, fs::copy_options::recursive);
    return out;
  }

  static inline std::unique_ptr<TempDir> dir_;
  static inline std::string text_;
  static inline PrepareOptions options_;
  static inline PrepareSummary summary_;
  static inline std::vector<std::string> log_;
};

TEST_F(IoCorpus, PrepareWritesConsistentFiles) {
  const fs::path out = options_.out_dir;
  for (const char* name : {"tokenizer.model", "train.bin", "val.bin", "meta.json"})
    EXPECT_TRUE(fs::exists(out / name)) << name;
  for (const auto& e : fs::directory_iterator(out))  // no temporary file of a write left behind
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  EXPECT_FALSE(log_.empty());

  const auto meta = nlohmann::json::parse(slurp(out / "meta.json"));
  EXPECT_EQ(meta["format_version"], kTokenFormatVersion);
  EXPECT_EQ(meta["vocab_size"], kVocab);
  EXPECT_EQ(meta["token_dtype"], "uint16");
  EXPECT_EQ(meta["tokenizer"], "tokenizer.model");
  EXPECT_EQ(meta["tokenizer_fnv1a64"], fmt::format("{:016x}", fnv1a64(slurp(out / "tokenizer.model"))));
  EXPECT_EQ(meta["tokenizer_trained"], true);
  EXPECT_EQ(meta["sources"][0]["path"], options_.inputs[0]);
  EXPECT_EQ(meta["sources"][0]["lines"], kLines);
  EXPECT_EQ(meta["val_fraction"], 0.05);
  EXPECT_EQ(meta["train_tokens"], summary_.train_tokens);
  EXPECT_EQ(meta["val_tokens"], summary_.val_tokens);
  EXPECT_EQ(fs::file_size(out / "train.bin"), 2u * static_cast<std::uint64_t>(summary_.train_tokens));
  EXPECT_EQ(fs::file_size(out / "val.bin"), 2u * static_cast<std::uint64_t>(summary_.val_tokens));

  EXPECT_EQ(summary_.vocab_size, kVocab);
  EXPECT_TRUE(summary_.trained_tokenizer);
  EXPECT_EQ(summary_.val_lines, 20);  // 5% of 400 non-blank lines
  EXPECT_EQ(summary_.train_lines, kLines - 20);

  const TokenData data = load_tokens(out);
  EXPECT_EQ(data.vocab_size, kVocab);
  EXPECT_EQ(static_cast<std::int64_t>(data.train.size()), summary_.train_tokens);
  EXPECT_EQ(static_cast<std::int64_t>(data.val.size()), summary_.val_tokens);
  EXPECT_EQ(data.tokenizer_path, (out / "tokenizer.model").string());
  EXPECT_DOUBLE_EQ(data.unigram_entropy_nats, summary_.unigram_entropy_nats);
  EXPECT_DOUBLE_EQ(data.unigram_val_xent_nats, summary_.unigram_val_xent_nats);

  // One EOS per line, at the end of each split.
  const Tokenizer tok = Tokenizer::load(data.tokenizer_path);
  EXPECT_EQ(data.eos_id, tok.eos_id());
  EXPECT_EQ(std::count(data.train.begin(), data.train.end(), tok.eos_id()), summary_.train_lines);
  EXPECT_EQ(std::count(data.val.begin(), data.val.end(), tok.eos_id()), summary_.val_lines);
  EXPECT_EQ(data.train.back(), tok.eos_id());
  EXPECT_EQ(data.val.back(), tok.eos_id());

  // The val split is the last whole lines of the corpus, in order.
  const auto lines = nonblank_lines(text_);
  const auto first_eos = std::find(data.val.begin(), data.val.end(), tok.eos_id());
  EXPECT_EQ(tok.decode(std::span(data.val.begin(), first_eos)), lines[kLines - 20]);
  const auto train_first_eos = std::find(data.train.begin(), data.train.end(), tok.eos_id());
  EXPECT_EQ(tok.decode(std::span(data.train.begin(), train_first_eos)), lines[0]);
}

TEST_F(IoCorpus, UnigramStatisticsMatchTheTokens) {
  const TokenData data = load_tokens(options_.out_dir);
  std::map<int, double> counts;
  for (int id : data.train) counts[id] += 1;
  const double n = static_cast<double>(data.train.size());
  double entropy = 0;
  for (const auto& [id, c] : counts) entropy -= c / n * std::log(c / n);
  double xent = 0;
  for (int id : data.val) xent -= std::log((counts[id] + 1) / (n + kVocab));
  xent /= static_cast<double>(data.val.size());
  EXPECT_NEAR(data.unigram_entropy_nats, entropy, 1e-9);
  EXPECT_NEAR(data.unigram_val_xent_nats, xent, 1e-9);
  EXPECT_GT(entropy, 1.0);
  EXPECT_LT(entropy, std::log(kVocab));
  EXPECT_GT(xent, entropy * 0.8);
}

TEST_F(IoCorpus, ReusesAnExistingTokenizer) {
  TempDir scratch;
  PrepareOptions reuse = options_;
  reuse.out_dir = (scratch / "reused").string();
  reuse.tokenizer = (fs::path(options_.out_dir) / "tokenizer.model").string();
  reuse.vocab_size = 4096;  // ignored: the tokenizer keeps its size
  const PrepareSummary s = prepare_corpus(reuse);
  EXPECT_FALSE(s.trained_tokenizer);
  EXPECT_EQ(s.vocab_size, kVocab);
  EXPECT_EQ(slurp(scratch / "reused" / "tokenizer.model"), slurp(reuse.tokenizer));
  EXPECT_EQ(slurp(scratch / "reused" / "train.bin"), slurp(fs::path(options_.out_dir) / "train.bin"));
  EXPECT_EQ(slurp(scratch / "reused" / "val.bin"), slurp(fs::path(options_.out_dir) / "val.bin"));
  const auto meta = nlohmann::json::parse(slurp(scratch / "reused" / "meta.json"));
  EXPECT_EQ(meta["tokenizer_trained"], false);
  EXPECT_EQ(meta["tokenizer_source"], reuse.tokenizer);
  EXPECT_NO_THROW(load_tokens(reuse.out_dir));
}

TEST_F(IoCorpus, TrainingIsDeterministic) {
  TempDir scratch;
  PrepareOptions again = options_;
  again.out_dir = (scratch / "again").string();
  std::ostringstream log;
  prepare_corpus(again, log);
  EXPECT_NE(log.str().find("trained the tokenizer"), std::string::npos);
  EXPECT_EQ(slurp(scratch / "again" / "tokenizer.model"), slurp(fs::path(options_.out_dir) / "tokenizer.model"));
  EXPECT_EQ(slurp(scratch / "again" / "train.bin"), slurp(fs::path(options_.out_dir) / "train.bin"));
}

TEST_F(IoCorpus, PrepareRejectsBadInputs) {
  TempDir scratch;
  PrepareOptions o = options_;
  o.out_dir = (scratch / "out").string();

  o.inputs = {(scratch / "nope.txt").string()};
  expect_error([&] { prepare_corpus(o); }, {"corpus file", "nope.txt", "does not exist"});

  spit(scratch / "blank.txt", "\n   \n\t\n");
  spit(scratch / "empty.txt", "");
  o.inputs = {(scratch / "blank.txt").string(), (scratch / "empty.txt").string()};
  expect_error([&] { prepare_corpus(o); }, {"corpus is empty", "blank.txt", "empty.txt"});

  o.inputs = options_.inputs;
  o.val_fraction = 1.5;
  expect_error([&] { prepare_corpus(o); }, {"val_fraction 1.5"});
  o.val_fraction = 0.05;

  o.model_type = "bigram";
  expect_error([&] { prepare_corpus(o); }, {"model_type 'bigram'"});
  o.model_type = "bpe";

  o.tokenizer = (scratch / "missing.model").string();
  expect_error([&] { prepare_corpus(o); }, {"tokenizer", "missing.model", "does not exist"});

  spit(scratch / "garbage.model", "definitely not a protobuf");
  o.tokenizer = (scratch / "garbage.model").string();
  expect_error([&] { prepare_corpus(o); }, {"garbage.model", "not a valid SentencePiece model"});
  EXPECT_FALSE(fs::exists(scratch / "out" / "meta.json"));
}

TEST_F(IoCorpus, TokenizerEncodesAndDecodes) {
  const Tokenizer tok = Tokenizer::load(fs::path(options_.out_dir) / "tokenizer.model");
  EXPECT_EQ(tok.vocab_size(), kVocab);
  EXPECT_GE(tok.bos_id(), 0);
  EXPECT_GE(tok.eos_id(), 0);
  EXPECT_NE(tok.bos_id(), tok.eos_id());
  const std::string text = "the lora miketes, unpo.";
  const auto ids = tok.encode(text);
  EXPECT_FALSE(ids.empty());
  for (int id : ids) EXPECT_TRUE(id >= 0 && id < kVocab);
  EXPECT_EQ(tok.decode(ids), text);
  const std::vector<std::int32_t> bad = {1, kVocab};
  expect_error([&] { tok.decode(bad); }, {"id 200", "200 entries"});
  TempDir scratch;
  expect_error([&] { Tokenizer::load(scratch / "none.model"); }, {"none.model", "does not exist"});
  spit(scratch / "bad.model", "\x08\x01garbage");
  expect_error([&] { Tokenizer::load(scratch / "bad.model"); }, {"bad.model", "not a valid SentencePiece model"});
}

TEST_F(IoCorpus, LoadDetectsOutOfVocabularyIds) {
  TempDir scratch;
  const fs::path dir = copy_prepared(scratch);
  std::string bin = slurp(dir / "train.bin");
  const std::uint16_t big = 9000;
  std::memcpy(bin.data() + 10, &big, 2);
  spit(dir / "train.bin", bin);
  expect_error([&] { load_tokens(dir); },
               {"token file " + (dir / "train.bin").string() + " holds id 9000 but the vocabulary has 200 entries",
                "re-run normlab prepare"});
}

TEST_F(IoCorpus, LoadDetectsWrongSizeBins) {
  TempDir scratch;
  const fs::path dir = copy_prepared(scratch);
  const std::string val = slurp(dir / "val.bin");
  spit(dir / "val.bin", val + "x");
  expect_error([&] { load_tokens(dir); }, {"val.bin", "not a multiple of 2"});
  spit(dir / "val.bin", val.substr(0, val.size() - 2));
  expect_error([&] { load_tokens(dir); }, {"val.bin", "but meta.json says"});
  fs::remove(dir / "val.bin");
  expect_error([&] { load_tokens(dir); }, {"val.bin", "does not exist", "normlab prepare"});
}

TEST_F(IoCorpus, LoadDetectsTokenizerMismatch) {
  TempDir scratch;
  const fs::path dir = copy_prepared(scratch);
  std::string model = slurp(dir / "tokenizer.model");
  model.back() ^= 1;
  spit(dir / "tokenizer.model", model);
  expect_error([&] { load_tokens(dir); }, {"tokenizer.model", "does not match", "meta.json", "normlab prepare"});
}

TEST_F(IoCorpus, LoadDetectsMissingOrDamagedMeta) {
  TempDir scratch;
  expect_error([&] { load_tokens(scratch / "nowhere"); }, {"nowhere", "does not exist", "normlab prepare"});
  const fs::path dir = copy_prepared(scratch);
  auto meta = nlohmann::json::parse(slurp(dir / "meta.json"));
  meta["format_version"] = 99;
  spit(dir / "meta.json", meta.dump());
  expect_error([&] { load_tokens(dir); }, {"meta.json", "format_version 99"});
  meta["format_version"] = kTokenFormatVersion;
  meta.erase("vocab_size");
  spit(dir / "meta.json", meta.dump());
  expect_error([&] { load_tokens(dir); }, {"meta.json", "'vocab_size'"});
  spit(dir / "meta.json", "{not json");
  expect_error([&] { load_tokens(dir); }, {"meta.json", "not valid JSON"});
  fs::remove(dir / "meta.json");
  expect_error([&] { load_tokens(dir); }, {"meta.json", "does not exist", "normlab prepare"});
}

}  // namespace
}  // namespace normlab::io
