// sacreBLEU's 13a tokenizer, corpus BLEU and chrF (src/train/translation_metrics.h) on cases small enough to
// work out by hand: each expected number is derived in the comment above it from the n-gram counts.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "train/translation_metrics.h"

namespace normlab::train {
namespace {

using Lines = std::vector<std::string>;

BleuScore bleu(const Lines& hyps, const Lines& refs) { return corpus_bleu(hyps, refs); }
ChrfScore chrf(const Lines& hyps, const Lines& refs) { return corpus_chrf(hyps, refs); }

TEST(TranslationMetrics, Tokenize13aSplitsPunctuationButKeepsNumbersAndWords) {
  EXPECT_EQ(tokenize_13a("3.5"), "3.5");    // period between digits stays
  EXPECT_EQ(tokenize_13a("a.b"), "a . b");  // else split on both sides
  EXPECT_EQ(tokenize_13a("end."), "end .");
  EXPECT_EQ(tokenize_13a("9."), "9 .");                 // the padding space after the line is the non-digit that splits
  EXPECT_EQ(tokenize_13a(".5 and 5."), ". 5 and 5 .");  // and the one before it
  EXPECT_EQ(tokenize_13a("1,000.50 dollars."), "1,000.50 dollars .");
  EXPECT_EQ(tokenize_13a("1-2"), "1 - 2");  // dash after a digit splits
  EXPECT_EQ(tokenize_13a("x-y"), "x-y");    // after a letter it stays
  EXPECT_EQ(tokenize_13a("a-1"), "a-1");
  EXPECT_EQ(tokenize_13a("3--4"), "3 - -4");  // only the dash right after the digit
  EXPECT_EQ(tokenize_13a("it's"), "it's");    // the apostrophe is not in the punctuation class
  EXPECT_EQ(tokenize_13a("\"quoted\""), "\" quoted \"");
  EXPECT_EQ(tokenize_13a("(a)[b]{c}<d>"), "( a ) [ b ] { c } < d >");
  EXPECT_EQ(tokenize_13a("Mr. Smith's 2.5-3.5%"), "Mr . Smith's 2.5 - 3.5 %");
  // ([^0-9])([.,]) takes "a." (the comma is then no \2 of that pass); ([.,])([^0-9]) splits ",x".
  EXPECT_EQ(tokenize_13a("a.,x"), "a . , x");
  EXPECT_EQ(tokenize_13a("  lots \t of  space "), "lots of space");
  EXPECT_EQ(tokenize_13a("x\u00a0y"), "x y");  // a no-break space is whitespace to Python's split()
  EXPECT_EQ(tokenize_13a(""), "");
}

TEST(TranslationMetrics, Tokenize13aUnescapesAndLeavesUtf8Intact) {
  EXPECT_EQ(tokenize_13a("a<skipped>b"), "ab");
  EXPECT_EQ(tokenize_13a("x-\ny"), "xy");  // a hyphen at a line break joins the word
  EXPECT_EQ(tokenize_13a("x\ny"), "x y");
  EXPECT_EQ(tokenize_13a("Tom &amp; Jerry"), "Tom & Jerry");
  EXPECT_EQ(tokenize_13a("&amp;lt; &quot;hi&quot; &gt;"), "< \" hi \" >");  // one replacement after another
  // Only ASCII punctuation splits: ¿ ¡ and the accented letters are bytes ≥ 0x80 that stay in their words.
  EXPECT_EQ(tokenize_13a("¿Qué? ¡Sí!"), "¿Qué ? ¡Sí !");
  EXPECT_EQ(tokenize_13a("año, niño."), "año , niño .");
  EXPECT_EQ(tokenize_13a("á.b 1.á"), "á . b 1 . á");
}

TEST(TranslationMetrics, BleuOfIdenticalSentencesIs100) {
  const BleuScore b = bleu({"the cat sat on the mat", "It is 3.5 km."}, {"the cat sat on the mat", "It is 3.5 km."});
  EXPECT_NEAR(b.score, 100.0, 1e-9);
  EXPECT_EQ(b.hyp_len, 11);  // 6 + "It is 3.5 km ." (5)
  EXPECT_EQ(b.ref_len, 11);
  EXPECT_EQ(b.correct, b.total);
  EXPECT_EQ(b.total[3], 3 + 2);
  EXPECT_DOUBLE_EQ(b.brevity_penalty, 1.0);
}

TEST(TranslationMetrics, BleuOfAHandWorkedPair) {
  // hyp "the cat sat on a mat", ref "the cat sat on the mat":
  //   1-grams the cat sat on a mat          5/6 (all but "a")
  //   2-grams the·cat cat·sat sat·on on·a a·mat   3/5
  //   3-grams the·cat·sat cat·sat·on sat·on·a on·a·mat   2/4
  //   4-grams the·cat·sat·on cat·sat·on·a sat·on·a·mat   1/3
  // BP = 1 (6 = 6); BLEU = 100·(5/6 · 3/5 · 2/4 · 1/3)^¼ = 100·(1/12)^¼ = 53.728...
  const BleuScore b = bleu({"the cat sat on a mat"}, {"the cat sat on the mat"});
  EXPECT_EQ(b.correct, (std::array<int64_t, 4>{5, 3, 2, 1}));
  EXPECT_EQ(b.total, (std::array<int64_t, 4>{6, 5, 4, 3}));
  EXPECT_NEAR(b.precisions[0], 500.0 / 6, 1e-9);
  EXPECT_NEAR(b.precisions[3], 100.0 / 3, 1e-9);
  EXPECT_NEAR(b.score, 100 * std::pow(1.0 / 12, 0.25), 1e-9);
  EXPECT_NEAR(b.score, 53.7284965911771, 1e-9);
}

TEST(TranslationMetrics, BleuClipsARepeatedWordAtTheReferenceCount) {
  // hyp "the the the the the the" against "the cat sat on the mat": "the" 6 times, credited 2 (the reference
  // has it twice); no 2-gram matches ("the the" is not in the reference).
  const BleuScore b = bleu({"the the the the the the"}, {"the cat sat on the mat"});
  EXPECT_EQ(b.correct, (std::array<int64_t, 4>{2, 0, 0, 0}));
  EXPECT_EQ(b.total, (std::array<int64_t, 4>{6, 5, 4, 3}));
}

TEST(TranslationMetrics, BleuAppliesTheBrevityPenaltyToAShortHypothesis) {
  // hyp "the cat sat on the" (c = 5) against "the cat sat on the mat" (r = 6): every n-gram matches,
  // 5/5 4/4 3/3 2/2, so BLEU = BP = exp(1 − 6/5) = exp(−0.2) · 100 = 81.873...
  const BleuScore b = bleu({"the cat sat on the"}, {"the cat sat on the mat"});
  EXPECT_EQ(b.correct, b.total);
  EXPECT_NEAR(b.brevity_penalty, std::exp(-0.2), 1e-12);
  EXPECT_NEAR(b.ratio, 5.0 / 6, 1e-12);
  EXPECT_NEAR(b.score, 100 * std::exp(-0.2), 1e-9);
  // A longer hypothesis is not rewarded: hyp "the cat sat on the mat mat" has BP 1.
  EXPECT_DOUBLE_EQ(bleu({"the cat sat on the mat mat"}, {"the cat sat on the mat"}).brevity_penalty, 1.0);
}

TEST(TranslationMetrics, BleuSmoothsAnOrderWithoutMatchesByHalvingEachTime) {
  // hyp "the cat sat under the mat", ref "the cat sat on the mat":
  //   1-grams 5/6 (the ×2, cat, sat, mat); 2-grams the·cat cat·sat the·mat 3/5; 3-grams the·cat·sat 1/4;
  //   4-grams 0/3 → exp smoothing, first zero order: p4 = 100/(2·3)
  // BLEU = 100·(5/6 · 3/5 · 1/4 · 1/6)^¼ = 100·48^−¼ = 37.99...
  const BleuScore one = bleu({"the cat sat under the mat"}, {"the cat sat on the mat"});
  EXPECT_EQ(one.correct, (std::array<int64_t, 4>{5, 3, 1, 0}));
  EXPECT_NEAR(one.precisions[3], 100.0 / 6, 1e-9);
  EXPECT_NEAR(one.score, 100 * std::pow(48.0, -0.25), 1e-9);
  // hyp "a b x c y", ref "a b c d e": 1-grams a b c 3/5; 2-grams a·b 1/4; 3-grams 0/3 → 100/(2·3);
  // 4-grams 0/2 → the second zero order halves again: 100/(4·2). BLEU = (60 · 25 · 50/3 · 12.5)^¼ = 23.64...
  const BleuScore two = bleu({"a b x c y"}, {"a b c d e"});
  EXPECT_EQ(two.correct, (std::array<int64_t, 4>{3, 1, 0, 0}));
  EXPECT_NEAR(two.precisions[2], 100.0 / 6, 1e-9);
  EXPECT_NEAR(two.precisions[3], 12.5, 1e-9);
  EXPECT_NEAR(two.score, std::pow(60 * 25 * (50.0 / 3) * 12.5, 0.25), 1e-9);
}

TEST(TranslationMetrics, BleuSumsStatisticsOverTheCorpusNotScores) {
  // Sentence 1 identical (6 words: 6/6 5/5 4/4 3/3), sentence 2 "a b" against "c d" (0/2, 0/1, no 3- or
  // 4-grams). Summed: 6/8 5/6 4/4 3/3, so BLEU = 100·(6/8 · 5/6)^¼ = 100·0.625^¼ = 88.91...; the mean of the
  // sentence scores would be (100 + 0)/2.
  const BleuScore b = bleu({"the cat sat on the mat", "a b"}, {"the cat sat on the mat", "c d"});
  EXPECT_EQ(b.correct, (std::array<int64_t, 4>{6, 5, 4, 3}));
  EXPECT_EQ(b.total, (std::array<int64_t, 4>{8, 6, 4, 3}));
  EXPECT_NEAR(b.score, 100 * std::pow(0.625, 0.25), 1e-9);
}

TEST(TranslationMetrics, BleuIsZeroWithoutMatchesOrWithoutAnyFourGram) {
  // No match at all: 0, and the precisions stay 0 (sacreBLEU returns before smoothing).
  const BleuScore none = bleu({"x y z w"}, {"a b c d e"});
  EXPECT_EQ(none.score, 0.0);
  EXPECT_EQ(none.precisions[0], 0.0);
  EXPECT_NEAR(none.brevity_penalty, std::exp(1 - 5.0 / 4), 1e-12);
  // Every n-gram matches but the corpus has no 4-gram: without effective order, log p4 = log 0 → BLEU 0.
  const BleuScore short_corpus = bleu({"a b c"}, {"a b c"});
  EXPECT_EQ(short_corpus.total[3], 0);
  EXPECT_NEAR(short_corpus.precisions[2], 100.0, 1e-9);
  EXPECT_EQ(short_corpus.score, 0.0);
  // An empty hypothesis: c = 0, BP = 0.
  const BleuScore empty = bleu({""}, {"a b c d"});
  EXPECT_EQ(empty.hyp_len, 0);
  EXPECT_EQ(empty.brevity_penalty, 0.0);
  EXPECT_EQ(empty.score, 0.0);
}

TEST(TranslationMetrics, BleuComparesTokenizedText) {
  // 13a makes "$3.50," into "$ 3.50 ,": a pre-tokenized reference then matches exactly, and a trailing
  // "-\n" is stripped before tokenizing (so "mat-" stays one word rather than joining the next line).
  EXPECT_NEAR(bleu({"It costs $3.50, right?"}, {"It costs $ 3.50 , right ?"}).score, 100.0, 1e-9);
  const BleuScore b = bleu({"the cat sat on the mat-\n"}, {"the cat sat on the mat-"});
  EXPECT_EQ(b.hyp_len, 6);
  EXPECT_NEAR(b.score, 100.0, 1e-9);
  // Case-sensitive: "The" is not "the".
  EXPECT_EQ(bleu({"The cat sat on the mat"}, {"the cat sat on the mat"}).correct[0], 5);
}

TEST(TranslationMetrics, ChrfOfAHandWorkedPair) {
  // hyp "ab", ref "ab c" → whitespace removed: "ab" against "abc".
  //   order 1: hyp a b (2), ref a b c (3), matches 2 → P 1, R 2/3
  //   order 2: hyp ab (1), ref ab bc (2), matches 1 → P 1, R 1/2
  //   order 3: hyp none → not an effective order (nor are 4–6)
  // P = 1, R = (2/3 + 1/2)/2 = 7/12; chrF2 = 100·5·P·R/(4P + R) = 100·(35/12)/(55/12) = 700/11 = 63.63...
  const ChrfScore c = chrf({"ab"}, {"ab c"});
  EXPECT_EQ(c.effective_order, 2);
  EXPECT_EQ(c.matches, (std::array<int64_t, 6>{2, 1, 0, 0, 0, 0}));
  EXPECT_EQ(c.ref_ngrams, (std::array<int64_t, 6>{3, 2, 1, 0, 0, 0}));
  EXPECT_NEAR(c.precision, 1.0, 1e-12);
  EXPECT_NEAR(c.recall, 7.0 / 12, 1e-12);
  EXPECT_NEAR(c.score, 700.0 / 11, 1e-9);
}

TEST(TranslationMetrics, ChrfIs100ForIdenticalAndZeroForDisjointText) {
  EXPECT_NEAR(chrf({"the cat sat on the mat"}, {"the cat sat on the mat"}).score, 100.0, 1e-9);
  EXPECT_NEAR(chrf({"a b c"}, {"abc"}).score, 100.0, 1e-9);  // whitespace does not count
  EXPECT_EQ(chrf({"abc"}, {"xyz"}).score, 0.0);
  EXPECT_EQ(chrf({""}, {"xyz"}).score, 0.0);
  // Recall weighs more than precision (β = 2): dropping half of the reference costs more than adding as much.
  EXPECT_LT(chrf({"abcdef"}, {"abcdefghijkl"}).score, chrf({"abcdefghijkl"}, {"abcdef"}).score);
}

TEST(TranslationMetrics, ChrfCountsCodePointsNotBytes) {
  // hyp "á", ref "á b" → "á" against "áb". In characters: order 1: 1 of hyp's 1, ref 2 → P 1, R 1/2; order 2:
  // hyp has none. chrF2 = 100·5·½/(4 + ½) = 55.55...  (In bytes, á = C3 A1 would give 63.63, as "ab"/"abc".)
  const ChrfScore c = chrf({"á"}, {"á b"});
  EXPECT_EQ(c.hyp_ngrams[0], 1);
  EXPECT_EQ(c.ref_ngrams[0], 2);
  EXPECT_EQ(c.effective_order, 1);
  EXPECT_NEAR(c.score, 250.0 / 4.5, 1e-9);
  EXPECT_NEAR(chrf({"¿Qué año?"}, {"¿Qué año?"}).score, 100.0, 1e-9);
}

TEST(TranslationMetrics, ChrfSumsStatisticsOverTheCorpus) {
  // "ab"/"ab c" (above) plus an identical "xyz"/"xyz": orders 1–3 gain 3, 2, 1 matches, hyp and ref n-grams.
  //   order 1: 5/5, R 5/6; order 2: 3/3, R 3/4; order 3: 1/1, R 1/2 (the hyp now has a 3-gram) → E = 3
  // P = 1, R = (5/6 + 3/4 + 1/2)/3 = 25/36; chrF2 = 100·5R/(4 + R) = 100·125/169 = 73.96...
  const ChrfScore c = chrf({"ab", "xyz"}, {"ab c", "xyz"});
  EXPECT_EQ(c.effective_order, 3);
  EXPECT_NEAR(c.recall, 25.0 / 36, 1e-12);
  EXPECT_NEAR(c.score, 12500.0 / 169, 1e-9);
}

TEST(TranslationMetrics, MetricsRefuseMismatchedCorpora) {
  for (auto metric : {+[](const Lines&h, const Lines&r) { (void)corpus_bleu(h, r); },
                      +[](const Lines&h, const Lines&r) { (void)corpus_chrf(h, r); }}) {
    try {
      metric({"a", "b"}, {"a"});
      FAIL() << "two hypotheses against one reference were accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("2 hypotheses but 1 references"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace normlab::train
