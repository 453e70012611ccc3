#include "io/corpus.h"

#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <ostream>
#include <set>
#include <span>
#include <system_error>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/config_reader.h"
#include "common/error.h"
#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/tokenizer.h"

namespace normlab::io {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kPrepareHint = "run normlab prepare to create it";
constexpr std::string_view kRerun = "re-run normlab prepare";

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; });
}

struct Source {
  std::string path;
  std::uint64_t bytes = 0;
  std::int64_t lines = 0;
  std::uint64_t fnv = 0;
};

// The text of every input, and views of its non-blank lines (without '\r' or '\n').
struct Corpus {
  std::vector<std::string> texts;
  std::vector<std::string_view> lines;
  std::vector<Source> sources;
};

Corpus read_corpus(const std::vector<std::string>& inputs) {
  Corpus corpus;
  corpus.texts.reserve(inputs.size());
  for (const std::string& path : inputs) {
    corpus.texts.push_back(
        read_file(path, "corpus file", "check the path (scripts/get-kjv.sh fetches data/kjv.txt)", kMaxDataFileBytes));
    const std::string& text = corpus.texts.back();
    Source source{path, text.size(), 0, fnv1a64(text)};
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!is_blank(line)) {
        corpus.lines.push_back(line);
        ++source.lines;
      }
      pos = end + 1;
    }
    corpus.sources.push_back(std::move(source));
  }
  return corpus;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

// Feeds the training lines to SentencePiece without a temporary file.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(std::span<const std::string_view> lines) : lines_(lines) { load(); }
  bool done() const override { return index_ >= lines_.size(); }
  void Next() override {
    ++index_;
    load();
  }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void load() {
    if (!done()) current_.assign(lines_[index_]);
  }
  std::span<const std::string_view> lines_;
  std::size_t index_ = 0;
  std::string current_;
};

std::string train_tokenizer(std::span<const std::string_view> lines, const PrepareOptions& options) {
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", fmt::format("{}", options.character_coverage)},
      {"input_sentence_size", "2000000"},  // sample at most this many lines (plenty; keeps big corpora fast)
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "65536"},  // longer lines are left out of training (still encoded)
      {"num_threads", std::to_string(threads)},
      {"minloglevel", "2"},  // SentencePiece logs only errors
  };
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(options.seed));
  LineIterator it(lines);
  std::string model;
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  if (!status.ok()) {
    // SentencePiece fails both ways: a vocabulary too small for the text's characters, or too large for its words.
    const std::string why = sentencepiece_error_text(status.message());
    const bool too_small =
        why.find("smaller than required") != std::string::npos || why.find("Increase vocab_size") != std::string::npos;
    fail("SentencePiece could not train a {} tokenizer with vocab_size {} on {} ({}): {}", options.model_type,
         options.vocab_size, join(options.inputs), why,
         too_small ? "raise --vocab-size above the text's distinct characters, or lower --character-coverage"
                   : "lower --vocab-size or add text");
  }
  return model;
}

// The output folder, checked before the tokenizer is trained (minutes on a big corpus): a path that is a file or lies
// under one, or in a folder this process cannot write, is refused at once. Nothing is created yet.
void check_out_dir(const fs::path& out) {
  std::error_code ec;
  fs::path existing = out;
  while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
  if (existing.empty()) existing = ".";
  if (!fs::is_directory(existing, ec))
    fail("prepare: --out {}: {} is a file, not a folder: give a folder to write the tokens into", out.string(),
         existing.string());
  if (::access(existing.c_str(), W_OK) != 0)
    fail("prepare: --out {}: cannot write into {} ({}): give a folder you can write", out.string(), existing.string(),
         std::strerror(errno));
}

void check_options(const PrepareOptions& o) {
  if (o.inputs.empty()) fail("prepare: no input text files given: pass at least one with --input (e.g. data/kjv.txt)");
  if (o.out_dir.empty()) fail("prepare: no output directory given: pass one with --out (e.g. data/kjv)");
  check_out_dir(o.out_dir);
  if (o.pairs && !(o.max_length_ratio >= 1.0))
    fail("prepare: max_length_ratio {} is below 1: give --max-length-ratio of at least 1 (e.g. 1.6)",
         o.max_length_ratio);
  if (!(o.val_fraction > 0.0 && o.val_fraction < 1.0)) {
    fail("prepare: val_fraction {} is out of range: give --val-fraction between 0 and 1 (e.g. 0.05)", o.val_fraction);
  }
  if (o.tokenizer.empty()) {
    static const char* const kTypes[] = {"bpe", "unigram", "char", "word"};
    if (std::find(std::begin(kTypes), std::end(kTypes), o.model_type) == std::end(kTypes)) {
      fail("prepare: model_type '{}' is unknown: give --model-type bpe, unigram, char or word", o.model_type);
    }
    if (o.vocab_size < 8 || o.vocab_size > (1 << 24)) {
      fail("prepare: vocab_size {} is out of range: give --vocab-size between 8 and 16777216 (e.g. 4096)",
           o.vocab_size);
    }
    // SentencePiece's own range (its trainer refuses anything else with an internal error).
    if (!(o.character_coverage >= kMinCharacterCoverage && o.character_coverage <= 1.0)) {
      fail(
          "prepare: character_coverage {} is out of range: SentencePiece takes --character-coverage from {} to 1 (1 "
          "keeps every character; its default 0.9995 drops the rarest)",
          o.character_coverage, kMinCharacterCoverage);
    }
  }
}

// A parallel corpus's lines as source, target, source, target ... (views into the corpus text). A line without a tab,
// or with an empty side, is an error naming it; pairs whose lengths differ by more than max_ratio are dropped.
std::vector<std::string_view> pair_halves(std::span<const std::string_view> lines, double max_ratio,
                                          std::int64_t& dropped) {
  std::vector<std::string_view> halves;
  halves.reserve(2 * lines.size());
  dropped = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string_view> fields;
    for (std::size_t start = 0;;) {
      const std::size_t tab = lines[i].find('\t', start);
      fields.push_back(lines[i].substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    if (fields.size() != 2 && fields.size() != 3)
      fail(
          "prepare --pairs: non-blank line {} has {} tab-separated fields ('{}'): each line must be "
          "source<TAB>target or reference<TAB>source<TAB>target",
          i + 1, fields.size(), printable(lines[i], 60));
    const std::string_view source = fields[fields.size() - 2], target = fields.back();
    if (is_blank(source) || is_blank(target))
      fail("prepare --pairs: non-blank line {} has an empty {} ('{}'): drop the line or fill it in", i + 1,
           is_blank(source) ? "source" : "target", printable(lines[i], 60));
    const double ratio = static_cast<double>(source.size()) / static_cast<double>(target.size());
    if (ratio > max_ratio || ratio < 1 / max_ratio) {
      ++dropped;
      continue;
    }
    halves.push_back(source);
    halves.push_back(target);
  }
  return halves;
}

// The distinct characters (UTF-8 sequences) of the lines that the tokenizer encodes as <unk>.
// Characters for a message, one space between: a control character (a raw byte of the corpus) shows as '?' rather
// than reaching the terminal.
std::string shown_characters(const std::vector<std::string>& characters) {
  std::string out;
  for (const std::string& c : characters) {
    if (!out.empty()) out += ' ';
    out += printable(c);
  }
  return out;
}

std::vector<std::string> unknown_characters(std::span<const std::string_view> lines, const Tokenizer& tokenizer) {
  std::set<std::string> characters;
  for (std::string_view line : lines)
    for (std::size_t i = 0; i < line.size();) {
      const auto lead = static_cast<unsigned char>(line[i]);
      const std::size_t n = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
      characters.emplace(line.substr(i, n));
      i += n;
    }
  std::vector<std::string> unknown;
  for (const std::string& c : characters) {
    const std::vector<std::int32_t> ids = tokenizer.encode(c);
    if (std::find(ids.begin(), ids.end(), tokenizer.unk_id()) != ids.end()) unknown.push_back(c);
  }
  return unknown;
}

struct UnigramStats {
  double entropy = 0, val_xent = 0;
};

UnigramStats unigram_stats(std::span<const std::int32_t> train, std::span<const std::int32_t> val, int vocab) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab), 0);
  for (std::int32_t id : train) ++counts[static_cast<std::size_t>(id)];
  UnigramStats s;
  const double n = static_cast<double>(train.size());
  for (std::int64_t c : counts) {
    if (c > 0) {
      double p = static_cast<double>(c) / n;
      s.entropy -= p * std::log(p);
    }
  }
  const double denom = n + vocab;
  double sum = 0;
  for (std::int32_t id : val)
    sum -= std::log((static_cast<double>(counts[static_cast<std::size_t>(id)]) + 1.0) / denom);
  s.val_xent = val.empty() ? 0.0 : sum / static_cast<double>(val.size());
  return s;
}

template <typename T>
std::string pack(std::span<const std::int32_t> ids) {
  std::string out(ids.size() * sizeof(T), '\0');
  char* p = out.data();
  for (std::int32_t id : ids) {
    T v = static_cast<T>(id);
    std::memcpy(p, &v, sizeof(T));
    p += sizeof(T);
  }
  return out;
}

// The output folder, made, with its meta.json removed: meta.json goes first out and last in, so a half-finished
// directory never looks complete.
void open_token_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    fail("prepare: cannot create output directory {} ({}): choose another --out directory", dir.string(),
         ec ? ec.message() : "a file has that name");
  }
  fs::remove(dir / "meta.json", ec);
}

// train.bin, val.bin and meta.json (last), with the fields every token directory has added to the caller's `meta`;
// returns the token dtype.
std::string write_token_files(const fs::path& dir, std::span<const std::int32_t> train_ids,
                              std::span<const std::int32_t> val_ids, int vocab, int eos, nlohmann::json meta,
                              const UnigramStats& stats) {
  const bool wide = vocab > 65535;
  const std::string dtype = wide ? "uint32" : "uint16";
  write_file_atomic(dir / "train.bin", wide ? pack<std::uint32_t>(train_ids) : pack<std::uint16_t>(train_ids));
  write_file_atomic(dir / "val.bin", wide ? pack<std::uint32_t>(val_ids) : pack<std::uint16_t>(val_ids));
  meta["format"] = "normlab-tokens";
  meta["format_version"] = kTokenFormatVersion;
  meta["vocab_size"] = vocab;
  meta["token_dtype"] = dtype;
  meta["eos_id"] = eos;
  meta["train_tokens"] = train_ids.size();
  meta["val_tokens"] = val_ids.size();
  meta["unigram_entropy_nats"] = stats.entropy;
  meta["unigram_val_xent_nats"] = stats.val_xent;
  write_file_atomic(dir / "meta.json", meta.dump(2) + "\n");
  return dtype;
}

}  // namespace

PrepareSummary prepare_corpus(const PrepareOptions& options, std::ostream& log) {
  return prepare_corpus(options, [&log](std::string_view line) { log << line << '\n' << std::flush; });
}

namespace {

// A progress line, where the caller asked for them.
struct Say {
  const ProgressFn& progress;
  void operator()(const std::string& text) const {
    if (progress) progress(text);
  }
};

// The corpus read and split by whole lines (or pairs: a parallel corpus's lines are its halves, source then target),
// train first.
struct SplitCorpus {
  Corpus corpus;
  std::uint64_t total_bytes = 0;
  std::int64_t dropped = 0;   // pairs whose lengths differ too much
  std::int64_t per_unit = 1;  // lines per pair or line
  std::int64_t n_train = 0, n_val = 0;
  std::size_t train_lines() const { return static_cast<std::size_t>(n_train * per_unit); }
};

// 1. Text.
SplitCorpus read_and_split(const PrepareOptions& options, const Say& say) {
  SplitCorpus text{read_corpus(options.inputs)};
  for (const Source& s : text.corpus.sources) text.total_bytes += s.bytes;
  if (options.pairs) {
    const auto n_read = text.corpus.lines.size();
    text.corpus.lines = pair_halves(text.corpus.lines, options.max_length_ratio, text.dropped);
    say(fmt::format("read {} pairs; dropped {} whose lengths differ by more than {}×", n_read, text.dropped,
                    options.max_length_ratio));
  }
  text.per_unit = options.pairs ? 2 : 1;
  const auto n_lines = static_cast<std::int64_t>(text.corpus.lines.size()) / text.per_unit;
  if (n_lines == 0) {
    fail("prepare: the corpus is empty ({} contain{} no non-blank lines): pass a text file with content",
         join(options.inputs), options.inputs.size() == 1 ? "s" : "");
  }
  if (n_lines < 2) {
    fail("prepare: the corpus has only 1 non-blank line ({}): need at least 2 so that train and val each get one",
         join(options.inputs));
  }
  text.n_val = std::min(std::max<std::int64_t>(1, std::llround(options.val_fraction * static_cast<double>(n_lines))),
                        n_lines - 1);
  text.n_train = n_lines - text.n_val;
  const char* unit = options.pairs ? "pairs" : "lines";
  say(fmt::format("read {} file{}: {} {}, {:.1f} MB ({} train {}, {} val {})", text.corpus.sources.size(),
                  text.corpus.sources.size() == 1 ? "" : "s", n_lines, unit,
                  static_cast<double>(text.total_bytes) / 1e6, text.n_train, unit, text.n_val, unit));
  return text;
}

// 2. The tokenizer's model file: trained on the train lines only, so val text stays unseen, or the one reused.
std::string tokenizer_model(const PrepareOptions& options, const SplitCorpus& text, const Say& say) {
  if (!options.tokenizer.empty()) {
    std::string bytes =
        read_file(options.tokenizer, "tokenizer", "check the path or leave it empty to train one", kMaxDataFileBytes);
    say(fmt::format("reusing tokenizer {}", options.tokenizer));
    return bytes;
  }
  say(fmt::format("training a {} tokenizer (vocab_size {}) on {} lines", options.model_type, options.vocab_size,
                  text.train_lines()));
  const auto t0 = Clock::now();
  std::string bytes = train_tokenizer(std::span(text.corpus.lines).first(text.train_lines()), options);
  say(fmt::format("trained the tokenizer in {:.1f} s", seconds_since(t0)));
  return bytes;
}

// The tokenizer needs an end-of-sequence piece; a vocabulary other than the one asked for is said.
void check_tokenizer(const Tokenizer& tokenizer, const PrepareOptions& options, bool trained, const Say& say) {
  const int vocab = tokenizer.vocab_size();
  if (tokenizer.eos_id() < 0) {
    fail("tokenizer {} has no end-of-sequence piece: train one with eos_id set (SentencePiece's default)",
         tokenizer.source());
  }
  if (!trained && vocab != options.vocab_size) {
    say(fmt::format("the reused tokenizer has {} pieces; vocab_size {} is ignored", vocab, options.vocab_size));
  }
  if (trained && vocab < options.vocab_size) {
    say(fmt::format("note: SentencePiece made {} pieces, fewer than --vocab-size {}{}", vocab, options.vocab_size,
                    options.model_type == "char"
                        ? " (a char model has one piece per kept character, plus <unk>, <s> and </s>)"
                        : ""));
  }
}

// 3. Every line encoded, then EOS, into the train and val ids. Lines are independent, so they encode in parallel.
void encode_split(const Tokenizer& tokenizer, const SplitCorpus& text, std::vector<std::int32_t>& train_ids,
                  std::vector<std::int32_t>& val_ids) {
  const auto& lines = text.corpus.lines;
  std::vector<std::vector<std::int32_t>> encoded(lines.size());
  std::string encode_error;
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(encoded.size()); ++i) {
    try {
      encoded[static_cast<std::size_t>(i)] = tokenizer.encode(lines[static_cast<std::size_t>(i)]);
    } catch (const Error& e) {
#pragma omp critical(normlab_encode_error)
      if (encode_error.empty()) encode_error = e.what();
    }
  }
  if (!encode_error.empty()) throw Error(encode_error);
  for (std::size_t i = 0; i < encoded.size(); ++i) {
    auto& target = i < text.train_lines() ? train_ids : val_ids;
    target.insert(target.end(), encoded[i].begin(), encoded[i].end());
    target.push_back(tokenizer.eos_id());
  }
}

// Characters of the text the tokenizer lacks (they become <unk>), with why: a tokenizer is trained on the train lines
// only, so a character seen only in the validation lines stays unknown at any coverage; a coverage below 1 also drops
// rare train characters.
void note_unknown_characters(const PrepareOptions& options, const SplitCorpus& text, const Tokenizer& tokenizer,
                             bool trained, std::span<const std::int32_t> train_ids,
                             std::span<const std::int32_t> val_ids, const Say& say) {
  const auto unknown = unknown_characters(text.corpus.lines, tokenizer);
  if (unknown.empty()) return;
  const auto unk_tokens = [&](std::span<const std::int32_t> ids) {
    return std::count(ids.begin(), ids.end(), tokenizer.unk_id());
  };
  const std::vector<std::string> in_train =
      unknown_characters(std::span<const std::string_view>(text.corpus.lines).first(text.train_lines()), tokenizer);
  std::vector<std::string> val_only;
  std::set_difference(unknown.begin(), unknown.end(), in_train.begin(), in_train.end(), std::back_inserter(val_only));
  const std::string only_val =
      val_only.empty() ? ""
                       : fmt::format("{} occur only in the validation lines and stay unknown at any coverage",
                                     shown_characters(val_only));
  std::string why;
  if (!trained) why = "the reused tokenizer lacks them";
  else if (in_train.empty()) why = "they occur only in the validation lines";
  else if (options.character_coverage < 1.0)
    why = fmt::format(
        "the tokenizer covers --character-coverage {} of the text's characters; give --character-coverage 1 to keep "
        "every character of the train lines{}",
        options.character_coverage, only_val.empty() ? "" : "; " + only_val);
  else why = only_val.empty() ? "SentencePiece left them out" : "SentencePiece left out the others; " + only_val;
  say(fmt::format(
      "note: {} distinct characters of the text are not in the tokenizer and become <unk> ({} train and {} val "
      "tokens): {}; {}",
      unknown.size(), unk_tokens(train_ids), unk_tokens(val_ids), shown_characters(unknown), why));
}

// meta.json's fields that say where the tokens came from (write_token_files adds the rest).
nlohmann::json provenance(const PrepareOptions& options, const SplitCorpus& text, const Tokenizer& tokenizer,
                          const std::string& model_bytes, bool trained) {
  nlohmann::json sources = nlohmann::json::array();
  for (const Source& s : text.corpus.sources) {
    sources.push_back({{"path", s.path}, {"bytes", s.bytes}, {"lines", s.lines}, {"fnv1a64", hex64(s.fnv)}});
  }
  nlohmann::json meta = {
      {"bos_id", tokenizer.bos_id()},
      {"train_lines", text.n_train},
      {"val_lines", text.n_val},
      {"tokenizer", "tokenizer.model"},
      {"tokenizer_fnv1a64", hex64(fnv1a64(model_bytes))},
      {"tokenizer_trained", trained},
      {"sources", sources},
      {"val_fraction", options.val_fraction},
  };
  if (options.pairs) {
    meta["task"] = "translate";
    meta["max_length_ratio"] = options.max_length_ratio;
    meta["dropped_pairs"] = text.dropped;
  }
  if (trained) {
    meta["model_type"] = options.model_type;
    meta["character_coverage"] = options.character_coverage;
    meta["seed"] = options.seed;
  } else {
    meta["tokenizer_source"] = options.tokenizer;
  }
  return meta;
}

}  // namespace

PrepareSummary prepare_corpus(const PrepareOptions& options, const ProgressFn& progress) {
  const auto start = Clock::now();
  const Say say{progress};
  check_options(options);
  const SplitCorpus text = read_and_split(options, say);

  const bool trained = options.tokenizer.empty();
  const std::string model_bytes = tokenizer_model(options, text, say);
  Tokenizer tokenizer = Tokenizer::from_bytes(
      model_bytes, trained ? fmt::format("(trained on {})", join(options.inputs)) : options.tokenizer);
  check_tokenizer(tokenizer, options, trained, say);

  const auto t0 = Clock::now();
  std::vector<std::int32_t> train_ids, val_ids;
  encode_split(tokenizer, text, train_ids, val_ids);
  say(fmt::format("encoded {} train + {} val tokens in {:.1f} s ({:.2f} tokens per byte)", train_ids.size(),
                  val_ids.size(), seconds_since(t0),
                  static_cast<double>(train_ids.size() + val_ids.size()) / static_cast<double>(text.total_bytes)));
  note_unknown_characters(options, text, tokenizer, trained, train_ids, val_ids, say);
  const UnigramStats stats = unigram_stats(train_ids, val_ids, tokenizer.vocab_size());
  say(fmt::format("unigram entropy {:.4f} nats (train), cross-entropy {:.4f} nats (val)", stats.entropy,
                  stats.val_xent));

  // 4. Files. meta.json goes first out and last in, so a half-finished run never looks complete.
  const fs::path dir = options.out_dir;
  open_token_dir(dir);
  write_file_atomic(dir / "tokenizer.model", model_bytes);
  const std::string dtype = write_token_files(dir, train_ids, val_ids, tokenizer.vocab_size(), tokenizer.eos_id(),
                                              provenance(options, text, tokenizer, model_bytes, trained), stats);

  PrepareSummary summary;
  summary.out_dir = dir.string();
  summary.vocab_size = tokenizer.vocab_size();
  summary.token_dtype = dtype;
  summary.trained_tokenizer = trained;
  summary.train_lines = text.n_train;
  summary.val_lines = text.n_val;
  summary.dropped_pairs = text.dropped;
  summary.train_tokens = static_cast<std::int64_t>(train_ids.size());
  summary.val_tokens = static_cast<std::int64_t>(val_ids.size());
  summary.unigram_entropy_nats = stats.entropy;
  summary.unigram_val_xent_nats = stats.val_xent;
  summary.seconds = seconds_since(start);
  say(fmt::format("wrote {} in {:.1f} s", dir.string(), summary.seconds));
  return summary;
}

PrepareSummary write_token_ids(const fs::path& out_dir, std::span<const std::int32_t> train,
                               std::span<const std::int32_t> val, int vocab_size, int eos_id,
                               std::string_view tokenizer_kind, std::string_view source) {
  const auto start = Clock::now();
  if (train.empty() || val.empty())
    fail("{}: the token data needs ids for both training and validation (it has {} and {}): give more text or ids",
         std::string(source), train.size(), val.size());
  const UnigramStats stats = unigram_stats(train, val, vocab_size);
  open_token_dir(out_dir);
  const nlohmann::json meta = {{"tokenizer_kind", tokenizer_kind}, {"tokenizer_source", source}};
  PrepareSummary summary;
  summary.out_dir = out_dir.string();
  summary.vocab_size = vocab_size;
  summary.token_dtype = write_token_files(out_dir, train, val, vocab_size, eos_id, meta, stats);
  summary.train_tokens = static_cast<std::int64_t>(train.size());
  summary.val_tokens = static_cast<std::int64_t>(val.size());
  summary.unigram_entropy_nats = stats.entropy;
  summary.unigram_val_xent_nats = stats.val_xent;
  summary.seconds = seconds_since(start);
  return summary;
}

// ---------------------------------------------------------------- loading

namespace {

template <typename T>
T meta_field(const nlohmann::json& meta, const std::string& file, const char* key) {
  auto it = meta.find(key);
  try {
    if (it != meta.end()) return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("{} has a malformed field '{}' ({}): {}", file, key, it->dump(), kRerun);
  }
  fail("{} lacks the field '{}': {}", file, key, kRerun);
}

std::vector<std::int32_t> load_bin(const fs::path& path, std::size_t width, std::int64_t expected, int vocab) {
  const std::string name = path.string();
  const auto different_runs = [&](std::uint64_t count) {
    fail("token file {} holds {} tokens but meta.json says {}: the files are from different runs; {}", name, count,
         expected, kRerun);
  };
  // meta.json's count bounds the file: one too big is refused by its size, before it is read.
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!ec && expected >= 0 && size / width > static_cast<std::uint64_t>(expected)) different_runs(size / width);
  std::string bytes = read_file(path, "token file", fmt::format("{} to create it", kRerun), kMaxDataFileBytes);
  if (bytes.size() % width != 0) {
    fail("token file {} has {} bytes, not a multiple of {} ({}): the file is damaged; {}", name, bytes.size(), width,
         width == 2 ? "uint16" : "uint32", kRerun);
  }
  const auto count = static_cast<std::int64_t>(bytes.size() / width);
  if (count != expected) different_runs(static_cast<std::uint64_t>(count));
  if (count == 0) fail("token file {} is empty: {}", name, kRerun);
  std::vector<std::int32_t> out(static_cast<std::size_t>(count));
  const char* p = bytes.data();
  std::uint32_t max_id = 0;
  for (auto& id : out) {
    std::uint32_t v;
    if (width == 2) {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      v = h;
    } else {
      std::memcpy(&v, p, 4);
    }
    p += width;
    max_id = std::max(max_id, v);
    id = static_cast<std::int32_t>(v);
  }
  if (max_id >= static_cast<std::uint32_t>(vocab)) {
    fail("token file {} holds id {} but the vocabulary has {} entries: {}", name, max_id, vocab, kRerun);
  }
  return out;
}

// meta.json of a token directory, parsed and bounded.
nlohmann::json read_meta(const fs::path& meta_path) {
  const std::string meta_name = meta_path.string();
  std::string text = read_file(meta_path, "token metadata",
                               fmt::format("{} (an interrupted prepare leaves no meta.json)", kPrepareHint));
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON ({}): {}", meta_name, detail::json_error_text(e), kRerun);
  }
  if (json_nesting(text) > kMaxNesting) fail("{} nests deeper than {} levels: {}", meta_name, kMaxNesting, kRerun);
  if (!meta.is_object()) fail("{} is not a JSON object: {}", meta_name, kRerun);
  return meta;
}

// The bytes per token that meta.json's token_dtype states, checked against its vocabulary.
std::size_t token_width(const nlohmann::json& meta, const std::string& meta_name, int vocab_size) {
  const auto dtype = meta_field<std::string>(meta, meta_name, "token_dtype");
  std::size_t width = 0;
  if (dtype == "uint16") width = 2;
  else if (dtype == "uint32") width = 4;
  else fail("{} has token_dtype '{}' (expected uint16 or uint32): {}", meta_name, dtype, kRerun);
  if (width == 2 && vocab_size > 65535) {
    fail("{} has token_dtype uint16 but vocab_size {}: {}", meta_name, vocab_size, kRerun);
  }
  return width;
}

// The tokenizer must be the one that made the tokens, and meta.json's vocabulary and end-of-sequence id must be its:
// a model sized from a wrong vocab_size would train the wrong vocabulary. Sets data.tokenizer_path.
void check_tokenizer(const fs::path& dir, const nlohmann::json& meta, const std::string& meta_name, TokenData& data) {
  const fs::path tok_path = dir / meta_field<std::string>(meta, meta_name, "tokenizer");
  const std::string recorded = meta_field<std::string>(meta, meta_name, "tokenizer_fnv1a64");
  const std::string tokenizer_bytes =
      read_file(tok_path, "tokenizer", fmt::format("{} to restore it", kRerun), kMaxDataFileBytes);
  const std::string actual = hex64(fnv1a64(tokenizer_bytes));
  if (actual != recorded) {
    fail("tokenizer {} does not match {} (FNV-1a-64 {}, recorded {}): the tokens were made with another tokenizer; {}",
         tok_path.string(), meta_name, actual, recorded, kRerun);
  }
  data.tokenizer_path = tok_path.string();
  const Tokenizer tokenizer = Tokenizer::from_bytes(tokenizer_bytes, tok_path.string());
  if (tokenizer.vocab_size() != data.vocab_size || tokenizer.eos_id() != data.eos_id)
    fail("{} says vocab_size {} and eos_id {}, but its tokenizer {} has {} pieces and eos_id {}: {}", meta_name,
         data.vocab_size, data.eos_id, tok_path.string(), tokenizer.vocab_size(), tokenizer.eos_id(), kRerun);
}

}  // namespace

TokenData load_tokens(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail("token directory {} does not exist: {}", dir.string(), kPrepareHint);
  if (!fs::is_directory(dir, ec)) {
    fail("{} is not a directory: pass the directory that normlab prepare wrote", dir.string());
  }
  const std::string meta_name = (dir / "meta.json").string();
  const nlohmann::json meta = read_meta(dir / "meta.json");
  const int version = meta_field<int>(meta, meta_name, "format_version");
  if (version != kTokenFormatVersion) {
    fail("{} has format_version {}, but this normlab reads version {}: {}", meta_name, version, kTokenFormatVersion,
         kRerun);
  }
  TokenData data;
  data.vocab_size = meta_field<int>(meta, meta_name, "vocab_size");
  if (data.vocab_size <= 0) fail("{} has vocab_size {}: {}", meta_name, data.vocab_size, kRerun);
  const std::size_t width = token_width(meta, meta_name, data.vocab_size);
  data.pairs = meta.value("task", "lm") == "translate";
  data.unigram_entropy_nats = meta_field<double>(meta, meta_name, "unigram_entropy_nats");
  data.unigram_val_xent_nats = meta_field<double>(meta, meta_name, "unigram_val_xent_nats");
  data.eos_id = meta_field<int>(meta, meta_name, "eos_id");
  if (data.eos_id < 0 || data.eos_id >= data.vocab_size)
    fail("{} has eos_id {}, outside the vocabulary's ids 0..{}: {}", meta_name, data.eos_id, data.vocab_size - 1,
         kRerun);
  data.train =
      load_bin(dir / "train.bin", width, meta_field<std::int64_t>(meta, meta_name, "train_tokens"), data.vocab_size);
  data.val = load_bin(dir / "val.bin", width, meta_field<std::int64_t>(meta, meta_name, "val_tokens"), data.vocab_size);
  // Token data made without SentencePiece (write_token_ids) has no tokenizer file to check against.
  if (meta.value("tokenizer_kind", "sentencepiece") == "sentencepiece") check_tokenizer(dir, meta, meta_name, data);
  return data;
}

}  // namespace normlab::io
