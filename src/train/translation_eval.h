#pragma once
// Scoring a translation model on its held-out pairs: greedy translations, detokenized, against the references, by
// BLEU and chrF (translation_metrics.h). The trainer runs it once at the end of an encoder-decoder run
// (train.bleu_pairs, into summary.json); `normlab translate` runs it on a checkpoint.
#include <string>
#include <vector>

#include "model/transformer.h"
#include "train/loader.h"
#include "train/translation_metrics.h"

namespace normlab::train {

struct TranslationScore {
  BleuScore bleu;
  ChrfScore chrf;
  std::vector<std::string> sources, references, translations;  // detokenized text, one entry per pair
  double seconds = 0;                                          // of the decoding
};

// Translates `count` validation pairs, spread evenly over the split (0 = all), with the model's batch: greedy
// search, or beam search for beam > 1 (model/translate.h).
TranslationScore score_translations(model::Model& m, const Loader& loader, const std::string& tokenizer_path,
                                    int32_t eos, int count, int beam = 1, double length_penalty = 1.0);

}  // namespace normlab::train
