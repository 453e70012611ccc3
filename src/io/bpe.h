#pragma once
// GPT-2's byte-level BPE tokenizer, read from a checkpoint's vocab.json and merges.txt (the files Hugging Face's GPT-2
// folders carry). Text is split by GPT-2's pre-tokenizer pattern, each piece's bytes become printable characters by
// GPT-2's byte-to-unicode map, and adjacent symbols are merged by merges.txt's ranks, lowest first, as the released
// encoder does; every final symbol must be a vocab.json entry.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace normlab::io {

// The pieces GPT-2's pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ cuts `text`
// into (byte ranges of the UTF-8 text, in order; together they are the text).
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

// `bytes` through GPT-2's byte-to-unicode map, one UTF-8 character per byte (' ' → "Ġ", '\n' → "Ċ").
std::string gpt2_byte_symbols(std::string_view bytes);

class Gpt2Bpe {
 public:
  // Reads DIR/vocab.json and DIR/merges.txt; one-sentence Error naming the file and what is wrong.
  static Gpt2Bpe load(const std::filesystem::path& dir);
  // The files' contents; the names are for the messages.
  static Gpt2Bpe parse(std::string_view vocab_json, std::string_view merges_txt, const std::string& vocab_name,
                       const std::string& merges_name);

  // Text to ids, with no end-of-text token added. Error, naming vocab.json, when a merged symbol is not in it.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // The id of `symbol` (in mapped form), or -1.
  std::int32_t id(const std::string& symbol) const;
  // The symbol of `id` in mapped form ("Ġthe": 'Ġ' is a space), or "" when vocab.json has no such id. A search of the
  // whole vocabulary: for naming a few tokens, not for decoding text.
  std::string symbol(std::int32_t id) const;
  // One more than the largest id vocab.json holds.
  int id_bound() const { return id_bound_; }
  std::size_t merges() const { return ranks_.size(); }

 private:
  std::vector<std::string> merge_word(std::string_view piece) const;

  std::unordered_map<std::string, std::int32_t> vocab_;
  std::unordered_map<std::string, int> ranks_;  // "left right" → rank (a mapped symbol never holds a space)
  std::string vocab_name_;
  int id_bound_ = 0;
};

}  // namespace normlab::io
