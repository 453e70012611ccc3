// GPT-2's byte-level BPE (io/bpe.h) on hand-made vocab.json and merges.txt whose results can be worked out by hand:
// the real files cannot be downloaded here, so no test claims a real GPT-2 id.
#include "io/bpe.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/io_test_util.h"

namespace normlab::io::testing {
namespace {

using Ids = std::vector<std::int32_t>;
using Pieces = std::vector<std::string_view>;

TEST(Bpe, BytesMapToGpt2sPrintableSymbols) {
  EXPECT_EQ(gpt2_byte_symbols("a~!"), "a~!");      // printable ASCII stands for itself
  EXPECT_EQ(gpt2_byte_symbols(" "), "Ġ");          // byte 32, the 33rd unprintable byte: U+0100 + 32
  EXPECT_EQ(gpt2_byte_symbols("\n"), "Ċ");         // byte 10: U+010A
  EXPECT_EQ(gpt2_byte_symbols("\xAD"), "Ń");       // the soft hyphen, the last unprintable byte: U+0143
  EXPECT_EQ(gpt2_byte_symbols("\xC3\xA9"), "Ã©");  // é's two UTF-8 bytes, each printable Latin-1
}

TEST(Bpe, ThePreTokenizerCutsAsGpt2sPattern) {
  EXPECT_EQ(gpt2_pretokenize("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(gpt2_pretokenize("I'm sure they'll don't"), (Pieces{"I", "'m", " sure", " they", "'ll", " don", "'t"}));
  // A contraction is lower case only, and a quote not followed by one is punctuation.
  EXPECT_EQ(gpt2_pretokenize("I'M 'x"), (Pieces{"I", "'", "M", " '", "x"}));
  EXPECT_EQ(gpt2_pretokenize("3.14 km, abc123!?"), (Pieces{"3", ".", "14", " km", ",", " abc", "123", "!?"}));
  // A run of white space leaves its last character to the next word; at the end it stays whole.
  EXPECT_EQ(gpt2_pretokenize("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(gpt2_pretokenize("a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  EXPECT_EQ(gpt2_pretokenize("x \n "), (Pieces{"x", " \n "}));
  // Letters and numbers beyond ASCII.
  EXPECT_EQ(gpt2_pretokenize("héllo wörld ½"), (Pieces{"héllo", " wörld", " ½"}));
  EXPECT_EQ(gpt2_pretokenize("中文 x٣"), (Pieces{"中文", " x", "٣"}));
}

// The published example "Hello world" → [15496, 995], in a vocabulary made so that it holds.
constexpr std::string_view kHelloVocab =
    R"({"H": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7, "He": 8, "ll": 9, "Hell": 10,
        "Ġw": 11, "or": 12, "Ġwor": 13, "ld": 14, "Hello": 15496, "Ġworld": 995, "<|endoftext|>": 15497})";
constexpr std::string_view kHelloMerges = "#version: 0.2\nH e\nl l\nHe ll\nHell o\nĠ w\no r\nĠw or\nl d\nĠwor ld\n";

TEST(Bpe, HelloWorldInAVocabularyWhereItsPublishedIdsHold) {
  const Gpt2Bpe bpe = Gpt2Bpe::parse(kHelloVocab, kHelloMerges, "vocab.json", "merges.txt");
  EXPECT_EQ(bpe.merges(), 9u);
  EXPECT_EQ(bpe.id_bound(), 15498);
  EXPECT_EQ(bpe.encode("Hello world"), (Ids{15496, 995}));
  // Without the last merges the word stays in the pieces merged so far.
  EXPECT_EQ(bpe.encode("Hell world word"), (Ids{10, 995, 13, 7}));
}

TEST(Bpe, TheLowestRankedPairMergesFirstEverywhere) {
  const std::string vocab = R"({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "aa": 5, "aaaa": 6})";
  EXPECT_EQ(Gpt2Bpe::parse(vocab, "b c\na b\n", "v", "m").encode("abc"), (Ids{0, 4}));
  EXPECT_EQ(Gpt2Bpe::parse(vocab, "a b\nb c\n", "v", "m").encode("abc"), (Ids{3, 2}));
  // Every occurrence of the pair merges in one step, left to right.
  const Gpt2Bpe a = Gpt2Bpe::parse(vocab, "a a\naa aa\n", "v", "m");
  EXPECT_EQ(a.encode("aaaa"), (Ids{6}));
  EXPECT_EQ(a.encode("aaa"), (Ids{5, 0}));
  EXPECT_EQ(a.encode("aaaaa"), (Ids{6, 0}));
}

TEST(Bpe, BadFilesAreNamedInOneSentence) {
  TempDir tmp;
  spit(tmp / "vocab.json", kHelloVocab);
  expect_error([&] { Gpt2Bpe::load(tmp.path()); },
               {(tmp / "merges.txt").string(), "does not exist", "needs both vocab.json and merges.txt"});
  expect_error([] { Gpt2Bpe::parse(kHelloVocab, "#version: 0.2\nH e\nHe ll o\n", "vocab.json", "m.txt"); },
               {"m.txt line 3 is \"He ll o\", not two symbols separated by one space"});
  expect_error([] { Gpt2Bpe::parse(kHelloVocab, "H e\nHello\n", "vocab.json", "m.txt"); }, {"m.txt line 2"});
  expect_error([] { Gpt2Bpe::parse("[1, 2]", "", "v.json", "m"); }, {"v.json is not a JSON object"});
  expect_error([] { Gpt2Bpe::parse(R"({"a": "x"})", "", "v.json", "m"); },
               {"v.json: \"a\" maps to \"x\", not a token id"});
  expect_error([] { Gpt2Bpe::parse(R"({"a": -1})", "", "v.json", "m"); }, {"v.json: \"a\" maps to -1"});
  expect_error([] { Gpt2Bpe::parse("{", "", "v.json", "m"); }, {"v.json is not valid JSON"});
  // A symbol the vocabulary lacks (GPT-2's holds every byte's).
  expect_error([] { Gpt2Bpe::parse(kHelloVocab, kHelloMerges, "v.json", "m").encode("Hello!"); },
               {"v.json has no entry for \"!\" (from the text \"!\")"});
}

}  // namespace
}  // namespace normlab::io::testing
