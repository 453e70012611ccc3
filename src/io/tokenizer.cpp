#include "io/tokenizer.h"

#include <sentencepiece_processor.h>

#include "common/error.h"
#include "io/atomic_file.h"

namespace normlab::io {

std::string sentencepiece_error_text(std::string_view message) {
  std::string_view text = message;
  if (auto end = text.rfind("] ");
      end != std::string_view::npos && text.substr(0, end).find(".cc(") != std::string_view::npos) {
    text.remove_prefix(end + 2);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '.')) text.remove_suffix(1);
  return text.empty() ? std::string(message) : std::string(text);
}

Tokenizer::Tokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp, std::string source)
    : sp_(std::move(sp)), source_(std::move(source)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  // Reading the bytes ourselves gives normlab's missing-file message instead of SentencePiece's.
  std::string bytes =
      read_file(path, "tokenizer", "check the path or run normlab prepare to train one", kMaxDataFileBytes);
  return from_bytes(bytes, path.string());
}

Tokenizer Tokenizer::from_bytes(std::string_view model_bytes, std::string source) {
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (model_bytes.empty()) {
    fail("tokenizer {} is empty: re-run normlab prepare or point to a SentencePiece .model file", source);
  }
  sentencepiece::util::Status status;
  try {
    status = sp->LoadFromSerializedProto({model_bytes.data(), model_bytes.size()});
  } catch (const std::exception& e) {
    // A model that parses but cannot be built (e.g. a zero-length piece makes its trie builder throw).
    fail("tokenizer {} is not a valid SentencePiece model ({}): re-run normlab prepare or point to a .model file",
         source, printable(e.what()));
  }
  if (!status.ok() || sp->GetPieceSize() <= 0) {
    fail("tokenizer {} is not a valid SentencePiece model ({}): re-run normlab prepare or point to a .model file",
         source, status.ok() ? "it has no pieces" : "the bytes do not parse as a model");
  }
  return Tokenizer(std::move(sp), std::move(source));
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  auto status = sp_->Encode({text.data(), text.size()}, &ids);
  if (!status.ok())
    fail("tokenizer {} could not encode text ({}): check the input encoding", source_,
         sentencepiece_error_text(status.message()));
  return {ids.begin(), ids.end()};
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  const int n = vocab_size();
  std::vector<int> copy;
  copy.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (id < 0 || id >= n) {
      fail(
          "cannot decode id {} with tokenizer {}: its vocabulary has {} entries (ids 0..{}): the ids come from "
          "a different tokenizer",
          id, source_, n, n - 1);
    }
    copy.push_back(id);
  }
  std::string text;
  auto status = sp_->Decode(copy, &text);
  if (!status.ok())
    fail("tokenizer {} could not decode ids ({}): check the ids", source_, sentencepiece_error_text(status.message()));
  return text;
}

int Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int Tokenizer::bos_id() const { return sp_->bos_id(); }
int Tokenizer::eos_id() const { return sp_->eos_id(); }
int Tokenizer::unk_id() const { return sp_->unk_id(); }

std::string Tokenizer::piece(int id) const {
  if (id < 0 || id >= vocab_size()) {
    fail("tokenizer {} has no id {} (vocabulary has {} entries)", source_, id, vocab_size());
  }
  return sp_->IdToPiece(id);
}

}  // namespace normlab::io
