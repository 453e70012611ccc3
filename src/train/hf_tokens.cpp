#include "train/hf_tokens.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/core.h>

#include "common/error.h"
#include "io/atomic_file.h"
#include "io/bpe.h"
#include "io/tokenizer.h"

namespace normlab::train {

namespace fs = std::filesystem;

namespace {

// The lines of `content` that hold more than white space.
std::vector<std::string_view> non_blank_lines(const std::string& content) {
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at <= content.size();) {
    std::size_t end = std::min(content.find('\n', at), content.size());
    const std::string_view line = std::string_view(content).substr(at, end - at);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) lines.push_back(line);
    at = end + 1;
  }
  return lines;
}

// The share of the data held out for validation, as one block at the end (normlab prepare's default).
constexpr double kValFraction = 0.05;

// How many of `n` units (lines, ids) the validation block takes: at least one, and one fewer than all.
std::size_t held_out(std::size_t n) {
  const auto share = static_cast<std::size_t>(std::llround(kValFraction * static_cast<double>(n)));
  return std::min(n - 1, std::max<std::size_t>(1, share));
}

// The checkpoint's tokenizer.model, checked to be the model's vocabulary.
void check_sentencepiece(const fs::path& model, int vocab_size) {
  const int pieces = io::Tokenizer::load(model).vocab_size();
  if (pieces != vocab_size)
    fail(
        "{} has {} pieces but config.json's vocab_size is {}: a run's token data must be the model's vocabulary "
        "exactly, so import without --text",
        model.string(), pieces, vocab_size);
}

// `text`'s non-blank lines through GPT-2's BPE, each followed by <|endoftext|>, as normlab prepare ends each line
// with its end-of-sequence piece; the last lines are the validation block.
HfTokens bpe_tokens(const fs::path& dir, int vocab_size, const fs::path& text) {
  const io::Gpt2Bpe bpe = io::Gpt2Bpe::load(dir);
  if (bpe.id_bound() > vocab_size)
    fail(
        "{} holds id {} but config.json's vocab_size is {}: the vocabulary is not this model's; use the files "
        "released with it",
        (dir / "vocab.json").string(), bpe.id_bound() - 1, vocab_size);
  HfTokens t{.kind = "gpt2-bpe", .source = fmt::format("{} through {}", text.string(), dir.string())};
  t.eos_id = bpe.id("<|endoftext|>");
  if (t.eos_id < 0)
    fail("{} has no <|endoftext|> entry, which ends each line of the token data: use GPT-2's own vocab.json",
         (dir / "vocab.json").string());
  t.bpe_dir = dir;
  const std::string content = io::read_file(text, "text", "check the --text path", io::kMaxDataFileBytes);
  const std::vector<std::string_view> lines = non_blank_lines(content);
  if (lines.size() < 2)
    fail("{} has {} non-blank line{}: give at least 2, so that training and validation each get one", text.string(),
         lines.size(), lines.size() == 1 ? "" : "s");
  const std::size_t n_train = lines.size() - held_out(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::int32_t>& into = i < n_train ? t.train : t.val;
    const std::vector<std::int32_t> ids = bpe.encode(lines[i]);
    into.insert(into.end(), ids.begin(), ids.end());
    into.push_back(t.eos_id);
  }
  return t;
}

// The id that ends a sequence in ids made elsewhere: config.json's eos_token_id where it is one of the model's ids.
// A language model's token data only records it (translation pairs use it to separate source and target), so 0
// stands in when the config names none.
int config_eos(const HfCheckpoint& checkpoint, int vocab_size) {
  const auto it = checkpoint.config().find("eos_token_id");
  if (it == checkpoint.config().end() || !it->is_number_integer()) return 0;
  const auto id = it->get<std::int64_t>();
  return id >= 0 && id < vocab_size ? static_cast<int>(id) : 0;
}

}  // namespace

std::vector<std::int32_t> read_token_ids(const fs::path& file, int vocab_size) {
  const std::string content = io::read_file(file, "token id file", "check the --token-ids path", io::kMaxDataFileBytes);
  std::vector<std::int32_t> ids;
  const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  for (std::size_t at = 0; at < content.size();) {
    if (space(content[at])) {
      ++at;
      continue;
    }
    std::size_t end = at;
    while (end < content.size() && !space(content[end])) ++end;
    const std::string_view word = std::string_view(content).substr(at, end - at);
    std::int64_t id = -1;
    const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (ec != std::errc() || ptr != word.data() + word.size() || id < 0 || id >= vocab_size)
      fail(
          "{}: token {} is '{}', not one of the model's ids 0..{} (config.json's vocab_size {}): give the ids its own "
          "tokenizer makes, separated by white space",
          file.string(), ids.size() + 1, printable(word, 40), vocab_size - 1, vocab_size);
    ids.push_back(static_cast<std::int32_t>(id));
    at = end;
  }
  return ids;
}

HfTokens read_hf_tokens(const HfCheckpoint& checkpoint, int vocab_size, const fs::path& text,
                        const fs::path& token_ids) {
  if (!text.empty() && !token_ids.empty())
    fail("--text and --token-ids both give the run's token data: give one of them");
  const fs::path& dir = checkpoint.dir();
  if (!token_ids.empty()) {
    HfTokens t{.kind = "token-ids", .eos_id = config_eos(checkpoint, vocab_size), .source = token_ids.string()};
    t.train = read_token_ids(token_ids, vocab_size);
    if (t.train.size() < 2)
      fail("{} holds {} id{}: give at least 2, so that training and validation each get one", token_ids.string(),
           t.train.size(), t.train.size() == 1 ? "" : "s");
    const auto n_train = static_cast<std::ptrdiff_t>(t.train.size() - held_out(t.train.size()));
    t.val.assign(t.train.begin() + n_train, t.train.end());
    t.train.resize(static_cast<std::size_t>(n_train));
    return t;
  }
  if (text.empty()) return {};
  if (fs::exists(dir / "tokenizer.model")) {
    check_sentencepiece(dir / "tokenizer.model", vocab_size);
    return {.text = text, .sentencepiece = dir / "tokenizer.model", .kind = "sentencepiece"};
  }
  if (fs::exists(dir / "vocab.json") || fs::exists(dir / "merges.txt")) return bpe_tokens(dir, vocab_size, text);
  fail(
      "{} has no tokenizer.model (SentencePiece: Llama 2, Mistral, Gemma 2) nor vocab.json and merges.txt (GPT-2's "
      "BPE), the tokenizers normlab reads: tokenize the text with the model's own tokenizer and give the ids with "
      "--token-ids FILE",
      dir.string());
}

io::PrepareSummary write_hf_tokens(const HfTokens& tokens, int vocab_size, const fs::path& data_dir) {
  if (tokens.kind == "sentencepiece") {
    io::PrepareOptions options;
    options.inputs = {tokens.text.string()};
    options.out_dir = data_dir.string();
    options.tokenizer = tokens.sentencepiece.string();
    options.val_fraction = kValFraction;
    return io::prepare_corpus(options);
  }
  const io::PrepareSummary summary =
      io::write_token_ids(data_dir, tokens.train, tokens.val, vocab_size, tokens.eos_id, tokens.kind, tokens.source);
  if (tokens.kind == "gpt2-bpe")
    for (const char* file : {"vocab.json", "merges.txt"})
      fs::copy_file(tokens.bpe_dir / file, data_dir / file, fs::copy_options::overwrite_existing);
  return summary;
}

std::optional<RunTokenizer> RunTokenizer::find(const fs::path& data_dir, const io::TokenData& data) {
  RunTokenizer t;
  t.eos_ = data.eos_id;
  if (!data.tokenizer_path.empty()) {
    t.kind_ = "sentencepiece";
    t.sentencepiece_ = std::make_shared<const io::Tokenizer>(io::Tokenizer::load(data.tokenizer_path));
  } else if (fs::exists(data_dir / "vocab.json") && fs::exists(data_dir / "merges.txt")) {
    t.kind_ = "gpt2-bpe";
    t.bpe_ = std::make_shared<const io::Gpt2Bpe>(io::Gpt2Bpe::load(data_dir));
  } else {
    return std::nullopt;
  }
  return t;
}

std::vector<std::int32_t> RunTokenizer::encode_lines(const fs::path& text) const {
  const std::string content = io::read_file(text, "text", "check the --text path", io::kMaxDataFileBytes);
  std::vector<std::int32_t> ids;
  for (const std::string_view line : non_blank_lines(content)) {
    const std::vector<std::int32_t> piece = sentencepiece_ ? sentencepiece_->encode(line) : bpe_->encode(line);
    ids.insert(ids.end(), piece.begin(), piece.end());
    ids.push_back(eos_);
  }
  if (ids.empty()) fail("{} has no line that holds more than white space: give a text to read", text.string());
  return ids;
}

std::string RunTokenizer::piece(std::int32_t id) const {
  return sentencepiece_ ? sentencepiece_->piece(id) : bpe_->symbol(id);
}

}  // namespace normlab::train
