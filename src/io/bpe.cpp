#include "io/bpe.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <array>
#include <climits>
#include <limits>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "io/atomic_file.h"
#include "io/json_error.h"

namespace normlab::io {
namespace {

namespace fs = std::filesystem;

// One character of the text: its code point and its bytes. A byte that does not start a valid UTF-8 sequence is a
// character of its own (U+FFFD, outside the letter and number classes), so every byte still reaches the BPE.
struct Char {
  char32_t cp;
  std::size_t size;
};

Char decode_utf8(std::string_view s, std::size_t at) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[at + i]); };
  const unsigned char lead = b(0);
  const std::size_t n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || at + n > s.size()) return {n == 1 ? lead : U'\uFFFD', 1};
  char32_t cp = n == 1 ? lead : lead & (0x7F >> n);
  for (std::size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return {U'\uFFFD', 1};
    cp = (cp << 6) | (b(i) & 0x3F);
  }
  return {cp, n};
}

// Unicode's number classes (\p{N}) beyond ASCII, which glibc's iswdigit does not take (it is ASCII only): the decimal
// digits of the common scripts and the usual numeric symbols. An approximation: digits of scripts not listed here
// count as letters (glibc's alpha class holds them).
constexpr std::array<std::pair<char32_t, char32_t>, 17> kNumberRanges{{
    {0x00B2, 0x00B3},
    {0x00B9, 0x00B9},
    {0x00BC, 0x00BE},
    {0x0660, 0x0669},
    {0x06F0, 0x06F9},
    {0x0966, 0x096F},
    {0x09E6, 0x09EF},
    {0x0E50, 0x0E59},
    {0x2070, 0x2070},
    {0x2074, 0x2079},
    {0x2080, 0x2089},
    {0x2150, 0x2189},
    {0x2460, 0x249B},
    {0x24EA, 0x24FF},
    {0x2776, 0x2793},
    {0x3007, 0x3007},
    {0xFF10, 0xFF19},
}};

// glibc's C.UTF-8 classes stand in for Unicode's: alpha is \p{L} plus the combining marks of some scripts (Thai
// vowel signs, for one), so a word holding them stays one piece where GPT-2 would cut it at the mark.
locale_t utf8_ctype() {
  static const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});
  return locale;
}

enum class Class { letter, number, space, other };

Class classify(char32_t cp) {
  if (cp < 0x80) {
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return Class::letter;
    if (cp >= '0' && cp <= '9') return Class::number;
    return (cp == ' ' || (cp >= '\t' && cp <= '\r') || (cp >= 0x1C && cp <= 0x1F)) ? Class::space : Class::other;
  }
  for (const auto& [lo, hi] : kNumberRanges)
    if (cp >= lo && cp <= hi) return Class::number;
  // Python's \s takes the no-break spaces that glibc's space class leaves out.
  if (cp == 0x85 || cp == 0xA0 || cp == 0x2007 || cp == 0x202F) return Class::space;
  const locale_t l = utf8_ctype();
  if (l == locale_t{}) return Class::other;  // no C.UTF-8: ASCII classes only
  const auto w = static_cast<wint_t>(cp);
  if (iswspace_l(w, l)) return Class::space;
  return iswalpha_l(w, l) ? Class::letter : Class::other;
}

// The length of GPT-2's contraction ('s 't 're 've 'm 'll 'd, lower case only, as its pattern is written) at `at`.
std::size_t contraction(std::string_view s, std::size_t at) {
  if (s[at] != '\'') return 0;
  for (std::string_view tail : {"s", "t", "re", "ve", "m", "ll", "d"})
    if (s.substr(at + 1, tail.size()) == tail) return 1 + tail.size();
  return 0;
}

// The bytes from `at` up to the first character not of class `c`.
std::size_t run_of(std::string_view s, std::size_t at, Class c) {
  std::size_t end = at;
  while (end < s.size()) {
    const Char ch = decode_utf8(s, end);
    if (classify(ch.cp) != c) break;
    end += ch.size;
  }
  return end;
}

// The end of the piece starting at `at`: the pattern's alternatives in order, each as the regex engine tries it.
std::size_t piece_end(std::string_view s, std::size_t at) {
  if (const std::size_t n = contraction(s, at)) return at + n;
  const Char first = decode_utf8(s, at);
  const Class c = classify(first.cp);
  // " ?X+": an optional ASCII space, then a run of letters, numbers or others.
  if (first.cp == U' ' && at + 1 < s.size()) {
    const Class next = classify(decode_utf8(s, at + 1).cp);
    if (next != Class::space) return run_of(s, at + 1, next);
  }
  if (c != Class::space) return run_of(s, at, c);
  // "\s+(?!\S)|\s+": a run of white space leaves its last character to the word after it, unless the run is that
  // one character.
  const std::size_t end = run_of(s, at, Class::space);
  if (end == s.size()) return end;
  std::size_t last = at;
  for (std::size_t i = at; i < end; i += decode_utf8(s, i).size) last = i;
  return last > at ? last : end;
}

// GPT-2's byte-to-unicode map: the printable Latin-1 bytes stand for themselves, the others (controls, space, the
// soft hyphen) take the code points from U+0100 on, in byte order.
const std::array<std::string, 256>& byte_symbols() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      t[static_cast<std::size_t>(b)] =
          cp < 0x80 ? std::string(1, static_cast<char>(cp))
                    : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
    return t;
  }();
  return table;
}

}  // namespace

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = piece_end(text, at);
    pieces.push_back(text.substr(at, end - at));
    at = end;
  }
  return pieces;
}

std::string gpt2_byte_symbols(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += byte_symbols()[static_cast<unsigned char>(c)];
  return out;
}

Gpt2Bpe Gpt2Bpe::load(const fs::path& dir) {
  const fs::path vocab = dir / "vocab.json", merges = dir / "merges.txt";
  const std::string hint = "GPT-2's byte-level BPE needs both vocab.json and merges.txt from the model's folder";
  return parse(read_file(vocab, "vocabulary", hint), read_file(merges, "merges file", hint), vocab.string(),
               merges.string());
}

Gpt2Bpe Gpt2Bpe::parse(std::string_view vocab_json, std::string_view merges_txt, const std::string& vocab_name,
                       const std::string& merges_name) {
  Gpt2Bpe bpe;
  bpe.vocab_name_ = vocab_name;
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vocab_json);
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON ({}): use the vocab.json the model was released with", vocab_name,
         detail::json_error_text(e));
  }
  if (!vocab.is_object())
    fail("{} is not a JSON object of symbol → id: use the vocab.json the model was released with", vocab_name);
  for (const auto& [symbol, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > INT32_MAX)
      fail("{}: \"{}\" maps to {}, not a token id (an integer from 0): use the vocab.json the model was released with",
           vocab_name, printable(symbol, 40), printable(id.dump(), 40));
    const auto n = static_cast<std::int32_t>(id.get<std::int64_t>());
    bpe.vocab_.emplace(symbol, n);
    bpe.id_bound_ = std::max(bpe.id_bound_, n + 1);
  }
  std::size_t line_no = 0;
  for (std::size_t at = 0; at < merges_txt.size();) {
    std::size_t end = merges_txt.find('\n', at);
    if (end == std::string_view::npos) end = merges_txt.size();
    std::string_view line = merges_txt.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    // The first line of a released merges.txt is its format's version, not a merge.
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const std::size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      fail(
          "{} line {} is \"{}\", not two symbols separated by one space: use the merges.txt the model was released "
          "with",
          merges_name, line_no, printable(line, 60));
    bpe.ranks_.emplace(std::string(line), static_cast<int>(bpe.ranks_.size()));
  }
  return bpe;
}

std::int32_t Gpt2Bpe::id(const std::string& symbol) const {
  const auto it = vocab_.find(symbol);
  return it == vocab_.end() ? -1 : it->second;
}

// The released encoder's loop: merge the adjacent pair of lowest rank, everywhere it occurs, until no pair has one.
std::vector<std::string> Gpt2Bpe::merge_word(std::string_view piece) const {
  std::vector<std::string> symbols;
  for (char c : piece) symbols.push_back(byte_symbols()[static_cast<unsigned char>(c)]);
  while (symbols.size() > 1) {
    int best = std::numeric_limits<int>::max();
    std::string best_pair;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      std::string pair = symbols[i] + ' ' + symbols[i + 1];
      const auto it = ranks_.find(pair);
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        best_pair = std::move(pair);
      }
    }
    if (best_pair.empty()) break;
    const std::size_t split = best_pair.find(' ');
    const std::string_view left = std::string_view(best_pair).substr(0, split);
    const std::string_view right = std::string_view(best_pair).substr(split + 1);
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        merged.push_back(symbols[i] + symbols[i + 1]);
        ++i;
      } else {
        merged.push_back(std::move(symbols[i]));
      }
    }
    symbols = std::move(merged);
  }
  return symbols;
}

std::vector<std::int32_t> Gpt2Bpe::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  // Words repeat: each distinct piece is merged once.
  std::unordered_map<std::string_view, std::vector<std::int32_t>> cache;
  for (std::string_view piece : gpt2_pretokenize(text)) {
    auto [it, fresh] = cache.try_emplace(piece);
    if (fresh) {
      for (const std::string& symbol : merge_word(piece)) {
        const std::int32_t n = id(symbol);
        if (n < 0)
          fail(
              "{} has no entry for \"{}\" (from the text \"{}\"): the vocabulary must hold every byte's symbol, as "
              "GPT-2's does; use the vocab.json the model was released with",
              vocab_name_, printable(symbol, 40), printable(piece, 40));
        it->second.push_back(n);
      }
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  return ids;
}

std::string Gpt2Bpe::symbol(std::int32_t id) const {
  for (const auto& [symbol, i] : vocab_)
    if (i == id) return symbol;
  return "";
}

}  // namespace normlab::io
