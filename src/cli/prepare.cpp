// normlab prepare: text files in, SentencePiece tokenizer and token splits out.
#include <iostream>

#include <fmt/core.h>

#include "cli/commands.h"
#include "io/corpus.h"

namespace normlab::cli {

void add_prepare(CLI::App& app) {
  auto opts = std::make_shared<io::PrepareOptions>();
  CLI::App* cmd = app.add_subcommand("prepare",
                                     "tokenize a text corpus: train (or reuse) a SentencePiece model, "
                                     "write train/val token files and meta.json");
  cmd->add_option("-i,--input", opts->inputs, "text file(s); each line is one piece of text (with --pairs: one pair)")
      ->required();
  cmd->add_flag("--pairs", opts->pairs,
                "a parallel corpus for translation: each line is source<TAB>target or reference<TAB>source<TAB>target "
                "(scripts/get-bible-pairs.sh writes data/kjv-rv.tsv)");
  cmd->add_option("--max-length-ratio", opts->max_length_ratio,
                  "with --pairs: drop pairs whose character lengths differ by more than this factor")
      ->capture_default_str();
  cmd->add_option("-o,--out", opts->out_dir, "output directory")->required();
  cmd->add_option("--vocab-size", opts->vocab_size, "vocabulary size of a newly trained tokenizer")
      ->capture_default_str();
  cmd->add_option("--tokenizer", opts->tokenizer, "reuse this SentencePiece .model instead of training one");
  cmd->add_option("--val-fraction", opts->val_fraction, "share of lines held out for validation (a block at the end)")
      ->capture_default_str();
  cmd->add_option("--model-type", opts->model_type, "SentencePiece model type")
      ->check(CLI::IsMember({"bpe", "unigram", "char", "word"}))
      ->capture_default_str();
  cmd->add_option("--character-coverage", opts->character_coverage,
                  "share of the text's characters a new tokenizer keeps; the rarest beyond it become <unk> (1: keep "
                  "every character)")
      ->capture_default_str();
  cmd->callback([opts] {
    io::PrepareSummary s = io::prepare_corpus(*opts, std::cerr);
    std::cout << fmt::format(
        "prepared {}: {}vocab {}{}, {} train tokens, {} val tokens, unigram entropy {:.4f} nats ({:.1f}s)\n", s.out_dir,
        opts->pairs
            ? fmt::format("{} train pairs, {} val pairs ({} dropped), ", s.train_lines, s.val_lines, s.dropped_pairs)
            : "",
        s.vocab_size,
        s.trained_tokenizer && s.vocab_size != opts->vocab_size ? fmt::format(" (asked for {})", opts->vocab_size) : "",
        s.train_tokens, s.val_tokens, s.unigram_entropy_nats, s.seconds);
  });
}

}  // namespace normlab::cli
