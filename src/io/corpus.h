#pragma once
// Corpus preparation (text -> tokenizer + token files) and loading of the token files.
// docs/data.md describes the files and their checks.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace normlab::io {

inline constexpr int kTokenFormatVersion = 1;
// The lowest --character-coverage SentencePiece's trainer accepts (trainer_interface.cc checks 0.98 to 1).
inline constexpr double kMinCharacterCoverage = 0.98;

struct PrepareOptions {
  std::vector<std::string> inputs;  // text files; each non-blank line is one document piece
  std::string out_dir;
  int vocab_size = 4096;           // for a trained tokenizer; a reused one keeps its own size
  std::string tokenizer;           // existing .model to reuse; empty = train one
  double val_fraction = 0.05;      // share of lines held out, as one block at the end
  std::string model_type = "bpe";  // SentencePiece model type: bpe, unigram, char, word
  std::uint64_t seed = 1;          // SentencePiece's sampling seed
  // The share of the text's characters a trained tokenizer must cover (SentencePiece's default); the
  // rarest characters beyond it become <unk>. 1 keeps every character; SentencePiece takes no less than 0.98.
  double character_coverage = 0.9995;
  // A parallel corpus: each line is `source<TAB>target` or `reference<TAB>source<TAB>target`. Both sides train one
  // tokenizer; the token files hold, per pair, source EOS target EOS; val_fraction holds out whole pairs.
  bool pairs = false;
  // Pairs whose character lengths differ by more than this factor either way are dropped (misaligned verses).
  double max_length_ratio = 1.6;
};

struct PrepareSummary {
  std::string out_dir;
  int vocab_size = 0;
  std::string token_dtype;  // "uint16" or "uint32"
  bool trained_tokenizer = false;
  std::int64_t train_lines = 0, val_lines = 0;  // pairs, for a parallel corpus
  std::int64_t dropped_pairs = 0;               // by max_length_ratio
  std::int64_t train_tokens = 0, val_tokens = 0;
  double unigram_entropy_nats = 0;   // entropy of the train unigram distribution
  double unigram_val_xent_nats = 0;  // val cross-entropy under the add-one-smoothed train unigram
  double seconds = 0;                // wall time of the whole preparation
};

using ProgressFn = std::function<void(std::string_view line)>;

// Reads the inputs, trains (or reuses) a tokenizer, encodes every line followed by EOS, splits
// train/val and writes out_dir/{tokenizer.model, train.bin, val.bin, meta.json} atomically,
// meta.json last. `progress` receives one-line status messages (may be empty).
PrepareSummary prepare_corpus(const PrepareOptions& options, const ProgressFn& progress = {});
PrepareSummary prepare_corpus(const PrepareOptions& options, std::ostream& log);

// Token data made without a SentencePiece model: ids from GPT-2's byte-level BPE, or ids a user tokenized elsewhere.
// Writes out_dir/{train.bin, val.bin, meta.json}; meta.json's tokenizer_kind ("gpt2-bpe", "token-ids") and
// tokenizer_source say where the ids came from. load_tokens reads it with no tokenizer (tokenizer_path empty): eval
// and probe use the ids, while generate and translate, which turn text into ids, need a SentencePiece directory.
// `source` names the input in the error when train or val would be empty.
PrepareSummary write_token_ids(const std::filesystem::path& out_dir, std::span<const std::int32_t> train,
                               std::span<const std::int32_t> val, int vocab_size, int eos_id,
                               std::string_view tokenizer_kind, std::string_view source);

struct TokenData {
  std::vector<std::int32_t> train, val;
  bool pairs = false;  // a parallel corpus: source EOS target EOS, pair after pair
  int vocab_size = 0;
  int eos_id = -1;
  double unigram_entropy_nats = 0;
  double unigram_val_xent_nats = 0;
  std::string tokenizer_path;  // out_dir/tokenizer.model; empty for write_token_ids's data
};

// Loads and validates a directory written by prepare_corpus.
TokenData load_tokens(const std::filesystem::path& dir);

}  // namespace normlab::io
