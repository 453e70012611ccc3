#pragma once
// The token data (RUN/data) of an imported checkpoint (train/hf_import.h), from one of:
//   --text FILE with the checkpoint's SentencePiece tokenizer.model (Llama 2, Mistral, Gemma 2), as normlab prepare
//               --tokenizer does;
//   --text FILE with the checkpoint's vocab.json and merges.txt (GPT-2's byte-level BPE, io/bpe.h);
//   --token-ids FILE, ids made by any other tokenizer, whitespace-separated.
// Everything that can be refused is read and checked before the import writes anything.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/bpe.h"
#include "io/corpus.h"
#include "io/tokenizer.h"
#include "train/hf_checkpoint.h"

namespace normlab::train {

struct HfTokens {
  std::filesystem::path text;            // --text through tokenizer.model: tokenized when written
  std::filesystem::path sentencepiece;   // that tokenizer.model
  std::filesystem::path bpe_dir;         // GPT-2's BPE: the folder of its vocab.json and merges.txt
  std::string kind;                      // "sentencepiece", "gpt2-bpe" or "token-ids"
  std::vector<std::int32_t> train, val;  // the ids of the other two kinds
  int eos_id = 0;
  std::string source;  // where the ids come from, for meta.json
};

// Reads and checks the token input, `text` or `token_ids` (both is refused); kind is empty when neither is given.
HfTokens read_hf_tokens(const HfCheckpoint& checkpoint, int vocab_size, const std::filesystem::path& text,
                        const std::filesystem::path& token_ids);

// RUN/data from what read_hf_tokens read; GPT-2's vocab.json and merges.txt are copied beside the ids, so that the run
// keeps its tokenizer (RunTokenizer finds it there).
io::PrepareSummary write_hf_tokens(const HfTokens& tokens, int vocab_size, const std::filesystem::path& data_dir);

// The text tokenizer of a run's token data: the SentencePiece tokenizer.model that made it (normlab prepare, import
// --text) or GPT-2's vocab.json and merges.txt kept beside it by import --text. `normlab probe --text` reads text
// through it and names tokens with it.
class RunTokenizer {
 public:
  // The tokenizer of `data`, the token data loaded from `data_dir` (a run's data.dir), or nullopt when it has neither
  // (ids from --token-ids).
  static std::optional<RunTokenizer> find(const std::filesystem::path& data_dir, const io::TokenData& data);
  // `text`'s non-blank lines, each followed by the end-of-sequence id, as the token data was made (one sentence naming
  // the file when it has no such line).
  std::vector<std::int32_t> encode_lines(const std::filesystem::path& text) const;
  // The token's text as the tokenizer writes it ("▁the" in SentencePiece, "Ġthe" in GPT-2's BPE).
  std::string piece(std::int32_t id) const;
  const std::string& kind() const { return kind_; }  // "sentencepiece" or "gpt2-bpe"

 private:
  std::shared_ptr<const io::Tokenizer> sentencepiece_;
  std::shared_ptr<const io::Gpt2Bpe> bpe_;
  std::string kind_;
  std::int32_t eos_ = 0;
};

// The ids of a --token-ids file: whitespace-separated decimal integers, each in 0..vocab_size-1 (one sentence naming
// the file, the position and the id otherwise).
std::vector<std::int32_t> read_token_ids(const std::filesystem::path& file, int vocab_size);

}  // namespace normlab::train
