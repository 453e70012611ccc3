#pragma once
// The token data (RUN/data) of an imported checkpoint (train/hf_import.h), from one of:
//   --text FILE with the checkpoint's SentencePiece tokenizer.model (Llama 2, Mistral, Gemma 2), as normlab prepare
//               --tokenizer does;
//   --text FILE with the checkpoint's vocab.json and merges.txt (GPT-2's byte-level BPE, io/bpe.h);
//   --token-ids FILE, ids made by any other tokenizer, whitespace-separated.
// Everything that can be refused is read and checked before the import writes anything.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/corpus.h"
#include "train/hf_checkpoint.h"

namespace normlab::train {

struct HfTokens {
  std::filesystem::path text;            // --text through tokenizer.model: tokenized when written
  std::filesystem::path sentencepiece;   // that tokenizer.model
  std::string kind;                      // "sentencepiece", "gpt2-bpe" or "token-ids"
  std::vector<std::int32_t> train, val;  // the ids of the other two kinds
  int eos_id = 0;
  std::string source;  // where the ids come from, for meta.json
};

// Reads and checks the token input, `text` or `token_ids` (both is refused); kind is empty when neither is given.
HfTokens read_hf_tokens(const HfCheckpoint& checkpoint, int vocab_size, const std::filesystem::path& text,
                        const std::filesystem::path& token_ids);

// RUN/data from what read_hf_tokens read.
io::PrepareSummary write_hf_tokens(const HfTokens& tokens, int vocab_size, const std::filesystem::path& data_dir);

// The ids of a --token-ids file: whitespace-separated decimal integers, each in 0..vocab_size-1 (one sentence naming
// the file, the position and the id otherwise).
std::vector<std::int32_t> read_token_ids(const std::filesystem::path& file, int vocab_size);

}  // namespace normlab::train
