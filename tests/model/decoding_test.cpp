// Decoding with a key-value cache (build_decoding_model, engine cached_attention): fed one position at a time, or a
// few at a time, the decoding model's logits equal the full causal model's at every position, for every placement
// and every preset (learned and rotary positions, soft-caps, QK-norm, stacks that carry several streams) and every
// encoder-decoder placement (the source encoded once); reordering the cache moves a row's history (beam search); and
// generate() picks the tokens generate_uncached() picks while the text fits the window.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/generate.h"
#include "model/generic_weights.h"
#include "model/placement.h"
#include "model/presets.h"
#include "model/transformer.h"

namespace normlab::model {
namespace {

namespace eng = normlab::engine;

constexpr int kBatch = 2, kSeq = 9, kVocab = 23;

Json tiny(Json model) {
  model.merge_patch(Json{
      {"vocab_size", kVocab}, {"d_model", 16}, {"n_heads", 2}, {"n_layers", 3}, {"d_ff", 24}, {"max_seq_len", 12}});
  return model;
}

std::vector<int32_t> tokens_for(int rows, int seq) {
  std::vector<int32_t> t(static_cast<size_t>(rows * seq));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 7 + 3) % kVocab);
  return t;
}

// The largest |difference| between the full model's logits and the decoding model's, fed `chunk` positions a pass.
double max_decoding_error(const Json& model_json, int chunk, eng::DType dtype = eng::DType::f64) {
  const ModelConfig c = read_model_config(tiny(model_json), "decoding test");
  auto full = build_model(c, kBatch, kSeq, dtype);
  init_generic(*full, 4);
  const std::vector<int32_t> tokens = tokens_for(kBatch, kSeq), targets(tokens.size(), 0);
  full->set_batch(tokens.data(), targets.data());
  full->forward(false);
  const std::vector<double> expected = eng::to_f64(full->graph, full->logits);

  auto decoder = build_decoding_model(c, kBatch, kSeq, chunk, dtype);
  copy_parameters(*full, *decoder);
  std::vector<int32_t> piece(static_cast<size_t>(kBatch * chunk)), no_targets(piece.size(), 0);
  double worst = 0;
  for (int first = 0; first + chunk <= kSeq; first += chunk) {
    for (int b = 0; b < kBatch; ++b)
      for (int t = 0; t < chunk; ++t) piece[static_cast<size_t>(b * chunk + t)] = tokens[b * kSeq + first + t];
    decoder->set_position(first);
    decoder->set_batch(piece.data(), no_targets.data());
    decoder->forward(false);
    const std::vector<double> got = eng::to_f64(decoder->graph, decoder->logits);
    for (int b = 0; b < kBatch; ++b)
      for (int t = 0; t < chunk; ++t)
        for (int v = 0; v < kVocab; ++v)
          worst = std::max(worst, std::abs(got[static_cast<size_t>((b * chunk + t) * kVocab + v)] -
                                           expected[static_cast<size_t>(((b * kSeq) + first + t) * kVocab + v)]));
  }
  return worst;
}

TEST(Decoding, EveryPlacementsCachedLogitsEqualTheFullModels) {
  for (const std::string& placement : placement_names()) {
    SCOPED_TRACE(placement);
    EXPECT_LT(max_decoding_error(Json{{"placement", placement}}, 1), 1e-10);
  }
}

TEST(Decoding, EveryPresetsCachedLogitsEqualTheFullModels) {
  for (const Preset& p : all_presets()) {
    if (p.model.value("shape", std::string("decoder")) != "decoder") continue;  // BERT: an encoder
    SCOPED_TRACE(p.name);
    EXPECT_LT(max_decoding_error(p.model, 1), 1e-10);
  }
}

TEST(Decoding, ChunksOfSeveralPositionsAndRotaryPositionsAgreeToo) {
  for (const char* positions : {"learned", "rope"})
    for (int chunk : {3, kSeq}) {
      SCOPED_TRACE(std::string(positions) + " chunk " + std::to_string(chunk));
      const Json model{{"placement", "pre"}, {"positions", positions}, {"options", {{"attn_softcap", 2.0}}}};
      EXPECT_LT(max_decoding_error(model, chunk), 1e-10);
    }
}

TEST(Decoding, Fp32CachedLogitsAgreeToRounding) {
  EXPECT_LT(max_decoding_error(Json{{"placement", "pre"}}, 1, eng::DType::f32), 1e-4);
}

// An encoder-decoder: the source encoded once, then the decoder fed one target position a pass; padded sources.
TEST(Decoding, EncoderDecoderCachedLogitsEqualTheFullModelsUnderEveryPlacement) {
  const std::vector<int32_t> source = tokens_for(kBatch, kSeq), lengths{5, kSeq};
  const std::vector<int32_t> longer = tokens_for(kBatch + 1, kSeq), target(longer.begin() + kSeq, longer.end());
  for (const std::string& placement : placement_names()) {
    SCOPED_TRACE(placement);
    const ModelConfig c = read_model_config(
        tiny(Json{{"placement", placement}, {"shape", "encoder_decoder"}, {"encoder_layers", 2}}), "decoding test");
    auto full = build_model(c, kBatch, kSeq, eng::DType::f64);
    init_generic(*full, 6);
    const std::vector<int32_t> no_targets(target.size(), -1);
    full->set_source(source.data(), lengths.data());
    full->set_batch(target.data(), no_targets.data());
    full->forward(false);
    const std::vector<double> expected = eng::to_f64(full->graph, full->logits);

    auto decoder = build_decoding_model(c, kBatch, kSeq, 1, eng::DType::f64);
    copy_parameters(*full, *decoder);
    decoder->set_source(source.data(), lengths.data());
    decoder->encode();
    double worst = 0;
    for (int t = 0; t < kSeq; ++t) {
      const std::vector<int32_t> column{target[static_cast<size_t>(t)], target[static_cast<size_t>(kSeq + t)]};
      decoder->set_position(t);
      decoder->set_batch(column.data(), no_targets.data());
      decoder->step();
      const std::vector<double> got = eng::to_f64(decoder->graph, decoder->logits);
      for (int b = 0; b < kBatch; ++b)
        for (int v = 0; v < kVocab; ++v)
          worst = std::max(worst, std::abs(got[static_cast<size_t>(b * kVocab + v)] -
                                           expected[static_cast<size_t>((b * kSeq + t) * kVocab + v)]));
    }
    EXPECT_LT(worst, 1e-10);
  }
}

// Beam search moves hypotheses between rows: after reorder_cache({1, 1}) both rows continue row 1's text.
TEST(Decoding, ReorderingTheCacheMovesARowsHistory) {
  const ModelConfig c = read_model_config(tiny(Json{{"placement", "pre"}}), "decoding test");
  auto full = build_model(c, kBatch, kSeq, eng::DType::f64);
  init_generic(*full, 8);
  const std::vector<int32_t> tokens = tokens_for(kBatch, kSeq), targets(tokens.size(), 0);
  full->set_batch(tokens.data(), targets.data());
  full->forward(false);
  const std::vector<double> expected = eng::to_f64(full->graph, full->logits);
  auto decoder = build_decoding_model(c, kBatch, kSeq, 1, eng::DType::f64);
  copy_parameters(*full, *decoder);
  for (int t = 0; t < kSeq; ++t) {
    if (t == 4) decoder->reorder_cache(std::vector<int>{1, 1});
    const int32_t second = tokens[static_cast<size_t>(kSeq + t)];
    const std::vector<int32_t> column{t < 4 ? tokens[static_cast<size_t>(t)] : second, second};
    decoder->set_position(t);
    decoder->set_batch(column.data(), targets.data());
    decoder->step();
    if (t < 4) continue;
    const std::vector<double> got = eng::to_f64(decoder->graph, decoder->logits);
    for (int b = 0; b < kBatch; ++b)
      for (int v = 0; v < kVocab; ++v)
        EXPECT_NEAR(got[static_cast<size_t>(b * kVocab + v)], expected[static_cast<size_t>((kSeq + t) * kVocab + v)],
                    1e-10);
  }
}

TEST(Decoding, TheCacheRefusesPositionsPastItsEndAndOtherShapes) {
  const ModelConfig c = read_model_config(tiny(Json{{"placement", "pre"}}), "decoding test");
  auto decoder = build_decoding_model(c, 1, 4);
  EXPECT_NO_THROW(decoder->set_position(3));
  EXPECT_THROW(decoder->set_position(4), Error);
  EXPECT_THROW(build_decoding_model(c, 1, 13), Error);  // beyond max_seq_len
  const ModelConfig encoder = read_model_config(tiny(Json{{"placement", "pre"}, {"shape", "encoder"}}), "test");
  EXPECT_THROW(build_decoding_model(encoder, 1, 4), Error);
}

// Greedy decoding of the same prompt: the cached path picks the uncached path's tokens while the whole text fits
// the window, and once it does not, its context (restarted from the last half window) is what it says it is.
TEST(Decoding, GenerateWithTheCachePicksTheTokensOfTheUncachedPath) {
  const ModelConfig c = read_model_config(tiny(Json{{"placement", "pre"}, {"positions", "rope"}}), "test");
  auto full = build_model(c, 1, kSeq);
  init_generic(*full, 2);
  auto decoder = build_decoding_model(c, 1, kSeq);
  copy_parameters(*full, *decoder);
  const std::vector<int32_t> prompt{5, 1, 17};
  std::vector<int32_t> cached = prompt, uncached = prompt;
  Sampler greedy_a(kVocab, 0, 0, 1), greedy_b(kVocab, 0, 0, 1);
  generate(*decoder, cached, kSeq - 3, greedy_a);
  generate_uncached(*full, uncached, kSeq - 3, greedy_b);
  EXPECT_EQ(cached, uncached);

  // Past the window: the tenth token still sees all nine before it; the eleventh comes after the restart, from the
  // last half window (positions 6..9 fed again from position 0), as the full model predicts it from those four.
  generate(*decoder, cached, 2, greedy_a);
  generate_uncached(*full, uncached, 1, greedy_b);
  ASSERT_EQ(cached.size(), 11u);
  EXPECT_EQ(cached[9], uncached[9]);
  const int half = kSeq / 2;
  std::vector<int32_t> restarted(cached.begin() + (10 - half), cached.begin() + 10);
  auto short_window = build_model(c, 1, half);
  copy_parameters(*full, *short_window);
  generate_uncached(*short_window, restarted, 1, greedy_b);
  EXPECT_EQ(restarted.back(), cached[10]);
}

}  // namespace
}  // namespace normlab::model
