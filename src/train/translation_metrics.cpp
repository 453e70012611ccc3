#include "train/translation_metrics.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/error.h"

namespace normlab::train {
namespace {

constexpr auto npos = std::string_view::npos;

// The code point of the UTF-8 sequence at s[i], advancing i past it. A byte that starts no valid sequence
// stands alone as U+DC00 + byte (Python's surrogateescape), so broken text still counts one per byte.
char32_t next_code_point(std::string_view s, size_t& i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  const size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 1) return byte(i++);
  if (len == 0 || i + len > s.size()) return 0xDC00 + byte(i++);
  char32_t cp = b & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0xDC00 + byte(i++);
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  i += len;
  return cp;
}

// Python's str.isspace(), which str.split() and str.rstrip() use: sacreBLEU splits words and strips
// lines with them, so a no-break space separates words here too.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// str.split(): the runs between whitespace, as views into s.
std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> words;
  size_t start = npos;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const bool space = is_space(next_code_point(s, i));
    if (space && start != npos) words.push_back(s.substr(start, at - start)), start = npos;
    if (!space && start == npos) start = at;
  }
  if (start != npos) words.push_back(s.substr(start));
  return words;
}

// str.rstrip(): BLEU strips each line before tokenizing, which matters for a trailing "-\n".
std::string_view rstrip(std::string_view s) {
  size_t end = 0;
  for (size_t i = 0; i < s.size();)
    if (!is_space(next_code_point(s, i))) end = i;
  return s.substr(0, end);
}

// str.replace(): non-overlapping, left to right.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t i = 0;
  for (size_t hit; (hit = s.find(from, i)) != npos; i = hit + from.size()) out.append(s.substr(i, hit - i)).append(to);
  return out.append(s.substr(i));
}

// re.sub of a two-character pattern (first)(second) by pre \1 mid \2 post. A match consumes both characters
// and the scan resumes after them, so in ".,x" the comma, taken as the \2 of ".,", is not then tested as a \1.
template <typename First, typename Second>
std::string sub_pairs(std::string_view s, First first, Second second, std::string_view pre, std::string_view mid,
                      std::string_view post) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out.append(pre).append(1, s[i]).append(mid).append(1, s[i + 1]).append(post);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_not_digit(char c) { return !is_digit(c); }
bool is_dot_comma(char c) { return c == '.' || c == ','; }
bool is_dash(char c) { return c == '-'; }
// [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation and space, less ' , - . which the later passes handle.
bool is_13a_punct(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

void check_sizes(const char* metric, size_t hypotheses, size_t references) {
  if (hypotheses != references)
    fail("{}: {} hypotheses but {} references: give exactly one reference line per hypothesis line", metric, hypotheses,
         references);
}

// The word n-grams of order n of a tokenized line, each as the piece of the line it spans (13a output has one
// space between words, so an n-gram is a contiguous piece).
std::vector<std::string_view> word_ngrams(const std::vector<std::string_view>& words, size_t n) {
  std::vector<std::string_view> grams;
  for (size_t i = 0; i + n <= words.size(); ++i)
    grams.emplace_back(words[i].data(),
                       static_cast<size_t>(words[i + n - 1].data() + words[i + n - 1].size() - words[i].data()));
  return grams;
}

std::vector<std::u32string_view> char_ngrams(std::u32string_view chars, size_t n) {
  std::vector<std::u32string_view> grams;
  for (size_t i = 0; i + n <= chars.size(); ++i) grams.push_back(chars.substr(i, n));
  return grams;
}

// Σ_g min(count_hyp(g), count_ref(g)) over distinct n-grams g: each hypothesis n-gram uses up one
// occurrence in the reference, so none is credited more often than the reference has it (clipping).
template <typename View>
int64_t clipped_matches(const std::vector<View>& hyp, const std::vector<View>& ref) {
  std::unordered_map<View, int64_t> left;
  left.reserve(ref.size());
  for (const View& gram : ref) ++left[gram];
  int64_t matches = 0;
  for (const View& gram : hyp)
    if (auto it = left.find(gram); it != left.end() && it->second > 0) --it->second, ++matches;
  return matches;
}

}  // namespace

std::string tokenize_13a(std::string_view line) {
  std::string s = replace_all(replace_all(replace_all(line, "<skipped>", ""), "-\n", ""), "\n", " ");
  if (s.find('&') != npos)
    for (auto [from, to] : {std::pair{"&quot;", "\""}, {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}})
      s = replace_all(s, from, to);
  std::string spaced;
  for (char c : " " + s + " ") {
    if (is_13a_punct(c)) spaced.append(1, ' ').append(1, c).append(1, ' ');
    else spaced += c;
  }
  spaced = sub_pairs(spaced, is_not_digit, is_dot_comma, "", " ", " ");
  spaced = sub_pairs(spaced, is_dot_comma, is_not_digit, " ", " ", "");
  spaced = sub_pairs(spaced, is_digit, is_dash, "", " ", " ");
  std::string out;
  for (std::string_view word : split_words(spaced)) out.append(out.empty() ? "" : " ").append(word);
  return out;
}

BleuScore corpus_bleu(std::span<const std::string> hypotheses, std::span<const std::string> references) {
  check_sizes("corpus_bleu", hypotheses.size(), references.size());
  BleuScore r;
  for (size_t s = 0; s < hypotheses.size(); ++s) {
    const std::string hyp_line = tokenize_13a(rstrip(hypotheses[s])), ref_line = tokenize_13a(rstrip(references[s]));
    const auto hyp_words = split_words(hyp_line), ref_words = split_words(ref_line);
    r.hyp_len += static_cast<int64_t>(hyp_words.size());
    r.ref_len += static_cast<int64_t>(ref_words.size());
    for (size_t n = 1; n <= 4; ++n) {
      const auto hyp = word_ngrams(hyp_words, n);
      r.total[n - 1] += static_cast<int64_t>(hyp.size());
      r.correct[n - 1] += clipped_matches(hyp, word_ngrams(ref_words, n));
    }
  }
  r.ratio = r.ref_len > 0 ? static_cast<double>(r.hyp_len) / static_cast<double>(r.ref_len) : 0.0;
  r.brevity_penalty = r.hyp_len >= r.ref_len ? 1.0
                      : r.hyp_len > 0        ? std::exp(1.0 - static_cast<double>(r.ref_len) / r.hyp_len)
                                             : 0.0;
  if (std::ranges::all_of(r.correct, [](int64_t c) { return c == 0; })) return r;  // sacreBLEU's early 0
  double smooth = 1.0, log_sum = 0.0;
  for (size_t n = 0; n < 4 && r.total[n] > 0; ++n) {
    const auto total = static_cast<double>(r.total[n]);
    if (r.correct[n] == 0) smooth *= 2.0;
    r.precisions[n] = r.correct[n] == 0 ? 100.0 / (smooth * total) : 100.0 * static_cast<double>(r.correct[n]) / total;
  }
  for (double p : r.precisions) log_sum += p > 0 ? std::log(p) : -9999999999.0;
  r.score = r.brevity_penalty * std::exp(log_sum / 4.0);
  return r;
}

ChrfScore corpus_chrf(std::span<const std::string> hypotheses, std::span<const std::string> references) {
  check_sizes("corpus_chrf", hypotheses.size(), references.size());
  auto characters = [](std::string_view s) {  // code points, whitespace removed (sacreBLEU's whitespace=False)
    std::u32string out;
    for (size_t i = 0; i < s.size();)
      if (char32_t c = next_code_point(s, i); !is_space(c)) out += c;
    return out;
  };
  ChrfScore r;
  for (size_t s = 0; s < hypotheses.size(); ++s) {
    const std::u32string hyp = characters(hypotheses[s]), ref = characters(references[s]);
    for (size_t n = 1; n <= 6; ++n) {
      const auto hyp_grams = char_ngrams(hyp, n), ref_grams = char_ngrams(ref, n);
      r.hyp_ngrams[n - 1] += static_cast<int64_t>(hyp_grams.size());
      r.ref_ngrams[n - 1] += static_cast<int64_t>(ref_grams.size());
      r.matches[n - 1] += clipped_matches(hyp_grams, ref_grams);
    }
  }
  for (size_t n = 0; n < 6; ++n) {
    if (r.hyp_ngrams[n] == 0 || r.ref_ngrams[n] == 0) continue;  // sacreBLEU's "effective order"
    r.precision += static_cast<double>(r.matches[n]) / static_cast<double>(r.hyp_ngrams[n]);
    r.recall += static_cast<double>(r.matches[n]) / static_cast<double>(r.ref_ngrams[n]);
    ++r.effective_order;
  }
  if (r.effective_order > 0) r.precision /= r.effective_order, r.recall /= r.effective_order;
  const double beta2 = 4.0;  // β = 2: recall weighs β² = 4 times precision
  if (r.precision + r.recall > 0)
    r.score = 100.0 * (1.0 + beta2) * r.precision * r.recall / (beta2 * r.precision + r.recall);
  return r;
}

}  // namespace normlab::train
