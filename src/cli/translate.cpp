// normlab translate: greedy translations from an encoder-decoder's checkpoint, scored with BLEU and chrF.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/error.h"
#include "io/atomic_file.h"
#include "io/tokenizer.h"
#include "model/translate.h"
#include "train/run.h"
#include "train/translation_eval.h"

namespace normlab::cli {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::istringstream in(
      io::read_file(path, "--input", "check the path (one source sentence per line)", io::kMaxDataFileBytes));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string tsv_field(std::string text) {  // a tab or newline inside a sentence would break the file's columns
  for (char& c : text)
    if (c == '\t' || c == '\n') c = ' ';
  return text;
}

std::string decoding(int beam) { return beam == 1 ? "greedy" : fmt::format("beam {}", beam); }

struct TranslateArgs {
  std::string run, input;
  int count = 500, batch = 16, beam = 1;
  double length_penalty = 1.0;
};

// --input: each line translated to stdout, the time to stderr.
void translate_lines(train::Run& run, const TranslateArgs& args) {
  const io::Tokenizer tok = io::Tokenizer::load(run.data.tokenizer_path);
  std::vector<std::vector<int32_t>> sources;
  for (const std::string& line : read_lines(args.input)) sources.push_back(tok.encode(line));
  const auto start = std::chrono::steady_clock::now();
  const auto outputs = model::translate(*run.model, sources, run.data.eos_id, args.beam, args.length_penalty);
  for (const auto& ids : outputs) std::cout << tok.decode(ids) << "\n";
  std::cerr << fmt::format("translated {} sentences in {:.1f} s ({})\n", outputs.size(),
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                           decoding(args.beam));
}

// Without --input: the validation pairs scored, into RUN/translations.tsv and RUN/translation.json.
void score_validation_pairs(train::Run& run, const TranslateArgs& args) {
  const train::TranslationScore s = train::score_translations(
      *run.model, *run.loader, run.data.tokenizer_path, run.data.eos_id, args.count, args.beam, args.length_penalty);
  std::string tsv = "source\treference\ttranslation\n";
  for (size_t i = 0; i < s.translations.size(); ++i)
    tsv +=
        fmt::format("{}\t{}\t{}\n", tsv_field(s.sources[i]), tsv_field(s.references[i]), tsv_field(s.translations[i]));
  io::write_file_atomic(fs::path(args.run) / "translations.tsv", tsv);
  const nlohmann::json summary = {{"step", run.step},
                                  {"pairs", s.translations.size()},
                                  {"decoding", decoding(args.beam)},
                                  {"length_penalty", args.length_penalty},
                                  {"bleu", s.bleu.score},
                                  {"bleu_precisions", s.bleu.precisions},
                                  {"brevity_penalty", s.bleu.brevity_penalty},
                                  {"chrf", s.chrf.score},
                                  {"metrics", "sacreBLEU's definitions: BLEU 13a, exp smoothing; chrF2"},
                                  {"seconds", s.seconds}};
  io::write_file_atomic(fs::path(args.run) / "translation.json", summary.dump(2) + "\n");
  std::cout << fmt::format(
      "{} validation pairs at step {}: BLEU {:.2f} (precisions {:.1f}/{:.1f}/{:.1f}/{:.1f}, brevity penalty {:.3f}), "
      "chrF {:.2f} ({:.1f} s, {}); wrote {}/translations.tsv\n",
      s.translations.size(), run.step, s.bleu.score, s.bleu.precisions[0], s.bleu.precisions[1], s.bleu.precisions[2],
      s.bleu.precisions[3], s.bleu.brevity_penalty, s.chrf.score, s.seconds, decoding(args.beam), args.run);
}

}  // namespace

void add_translate(CLI::App& app) {
  auto args = std::make_shared<TranslateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "translate",
      "translate with an encoder-decoder's checkpoint (greedy, or beam search with --beam). Without --input: the "
      "validation pairs, scored with "
      "BLEU and chrF (sacreBLEU's definitions) into RUN/translation.json and RUN/translations.tsv");
  cmd->add_option("-r,--run", args->run, "run directory of an encoder_decoder model")->required();
  cmd->add_option("-i,--input", args->input, "source sentences, one per line; translations go to stdout");
  // Ranges are checked in the callback, not by CLI11's validators, whose message quotes a range up to 1.8e308.
  cmd->add_option("-n,--count", args->count, "validation pairs to score, spread evenly over the split (0 = all)")
      ->capture_default_str();
  cmd->add_option("-b,--batch", args->batch, "rows decoded at once (each sentence takes --beam rows)")
      ->capture_default_str();
  cmd->add_option("--beam", args->beam, "beam size; 1 = greedy search")->capture_default_str();
  cmd->add_option("--length-penalty", args->length_penalty,
                  "beam search ranks ended hypotheses by log p / (length + 1)^this (fairseq's lenpen)")
      ->capture_default_str();
  cmd->callback([args] {
    if (args->count < 0) fail("--count {}: give the number of validation pairs to score, or 0 for all", args->count);
    if (args->batch < 1) fail("--batch {}: give the rows decoded at once, 1 or more", args->batch);
    if (args->beam < 1) fail("--beam {}: give the beam size, 1 (greedy search) or more", args->beam);
    if (!std::isfinite(args->length_penalty))
      fail("--length-penalty {}: give a finite number (1 is fairseq's default)", args->length_penalty);
    if (args->beam > args->batch)
      fail("--beam {} needs at least as many rows: give --batch {} or more", args->beam, args->beam);
    train::Run run = train::open_run(args->run, args->batch, {.gradients = false});
    if (!run.config.model.encoder_decoder())
      fail("{} is a {} (model.shape = {}): translate needs an encoder_decoder run; `normlab generate` continues text",
           args->run, model::name(run.config.model.shape), model::name(run.config.model.shape));
    if (args->input.empty()) score_validation_pairs(run, *args);
    else translate_lines(run, *args);
  });
}

}  // namespace normlab::cli
