#include "train/translation_eval.h"

#include <chrono>

#include "io/tokenizer.h"
#include "model/translate.h"

namespace normlab::train {

TranslationScore score_translations(model::Model& m, const Loader& loader, const std::string& tokenizer_path,
                                    int32_t eos, int count, int beam, double length_penalty) {
  const io::Tokenizer tok = io::Tokenizer::load(tokenizer_path);
  const std::vector<Pair>& pairs = loader.val_pairs();
  const std::span<const int32_t> val = loader.val();
  const size_t n = count == 0 ? pairs.size() : std::min(pairs.size(), static_cast<size_t>(count));
  TranslationScore score;
  std::vector<std::vector<int32_t>> sources;
  for (size_t i = 0; i < n; ++i) {
    const Pair& p = pairs[n > 1 ? i * (pairs.size() - 1) / (n - 1) : 0];
    sources.emplace_back(val.begin() + p.source, val.begin() + p.source + p.source_length);
    score.sources.push_back(tok.decode(sources.back()));
    score.references.push_back(
        tok.decode(val.subspan(static_cast<size_t>(p.target), static_cast<size_t>(p.target_length))));
  }
  const auto start = std::chrono::steady_clock::now();
  for (const auto& ids : model::translate(m, sources, eos, beam, length_penalty))
    score.translations.push_back(tok.decode(ids));
  score.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  score.bleu = corpus_bleu(score.translations, score.references);
  score.chrf = corpus_chrf(score.translations, score.references);
  return score;
}

}  // namespace normlab::train
