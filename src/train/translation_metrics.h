#pragma once
// Translation metrics exactly as sacreBLEU 2.x defines them with its default settings, so that a number
// computed here can be set beside a published one: the 13a tokenizer, corpus BLEU and corpus chrF, with
// one reference per sentence. Text is UTF-8; "whitespace" is what Python's str.split() splits on.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace normlab::train {

// sacreBLEU's default tokenizer "13a" (mteval-v13a.pl), in sacreBLEU's order:
//   1. remove "<skipped>" and "-\n", turn "\n" into " ", then (one after another) &quot; → ", &amp; → &,
//      &lt; → <, &gt; → >;
//   2. pad with a space on each side, then four regex substitutions, each a left-to-right pass whose match
//      consumes both characters (re.sub):
//        ([{-~[-` -&(-+:-@/])  → " \1 "    space out punctuation (not ' , - . digits letters)
//        ([^0-9])([.,])          → "\1 \2 "  period, comma unless after a digit
//        ([.,])([^0-9])          → " \1 \2"  period, comma unless before a digit
//        ([0-9])(-)              → "\1 \2 "  dash after a digit
//   3. collapse whitespace runs to one space, strip the ends.
// The patterns name ASCII characters only, so the bytes of other UTF-8 characters (á, ¿) stay in words.
std::string tokenize_13a(std::string_view line);

struct BleuScore {
  double score = 0;                    // 0..100
  std::array<double, 4> precisions{};  // p_n in percent, after smoothing
  double brevity_penalty = 0;
  double ratio = 0;  // hyp_len / ref_len (0 when ref_len = 0)
  int64_t hyp_len = 0, ref_len = 0;
  std::array<int64_t, 4> correct{}, total{};  // clipped matches and hypothesis n-grams, n = 1..4
};

// Corpus BLEU (Papineni et al. 2002; sacreBLEU defaults: 13a, case-sensitive, N = 4, smoothing "exp").
// Each line is right-stripped and tokenized; over sentences s and n-grams g of order n:
//   correct_n = Σ_s Σ_g min(count_hyp(g), count_ref(g)),   total_n = Σ_s Σ_g count_hyp(g)
//   p_n = 100·correct_n/total_n;  where correct_n = 0: p_n = 100/(2^k·total_n), k = how many orders ≤ n
//         had no match (exp smoothing); orders from the first with total_n = 0 on keep p_n = 0
//   BP = 1 if c ≥ r, exp(1 − r/c) if 0 < c < r, 0 if c = 0      (c = hyp_len, r = ref_len)
//   BLEU = BP · exp(¼ Σ_n log p_n), log 0 taken as −9999999999, so a missing order gives 0;
//   and BLEU = 0 (precisions 0) when no n-gram of any order matches.
// No effective order: a corpus of hypotheses shorter than 4 words scores 0, as in sacreBLEU.
// Throws Error unless there is exactly one reference per hypothesis.
BleuScore corpus_bleu(std::span<const std::string> hypotheses, std::span<const std::string> references);

struct ChrfScore {
  double score = 0;                                              // 0..100
  double precision = 0, recall = 0;                              // averaged over the effective orders, 0..1
  int effective_order = 0;                                       // orders with both hypothesis and reference n-grams
  std::array<int64_t, 6> matches{}, hyp_ngrams{}, ref_ngrams{};  // per order n = 1..6, summed over the corpus
};

// Corpus chrF2 (Popović 2015; sacreBLEU defaults: character order 6, word order 0, β = 2, whitespace
// removed, case-sensitive). Characters are Unicode code points. Summing the statistics over sentences:
//   P_n = matches_n/hyp_n, R_n = matches_n/ref_n, over the E orders where hyp_n > 0 and ref_n > 0;
//   P = (1/E) Σ P_n,  R = (1/E) Σ R_n,  chrF = 100·(1 + β²)·P·R / (β²·P + R)   (0 when P + R = 0 or E = 0)
// where matches_n = Σ_s Σ_g min(count_hyp(g), count_ref(g)) over character n-grams g.
// Throws Error unless there is exactly one reference per hypothesis.
ChrfScore corpus_chrf(std::span<const std::string> hypotheses, std::span<const std::string> references);

}  // namespace normlab::train
