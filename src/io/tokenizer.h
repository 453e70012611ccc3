#pragma once
// A SentencePiece model behind a small, exception-based interface.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace normlab::io {

// SentencePiece's status text without its source-location prefix ("./src/x.cc(12) [cond] ").
std::string sentencepiece_error_text(std::string_view message);

class Tokenizer {
 public:
  // Loads a SentencePiece .model file; Error if it is missing or not a valid model.
  static Tokenizer load(const std::filesystem::path& path);
  // Loads a model from its serialized bytes; `source` names it in error messages.
  static Tokenizer from_bytes(std::string_view model_bytes, std::string source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text to ids, without BOS/EOS. Safe to call from several threads at once.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // Ids to text; Error if an id is outside [0, vocab_size()).
  std::string decode(std::span<const std::int32_t> ids) const;

  int vocab_size() const;
  int bos_id() const;  // -1 if the model has none
  int eos_id() const;  // -1 if the model has none
  int unk_id() const;
  std::string piece(int id) const;  // the id's piece text ("▁the", "<unk>", ...)
  const std::string& source() const { return source_; }

 private:
  Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp, std::string source);
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string source_;
};

}  // namespace normlab::io
