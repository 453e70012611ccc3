#pragma once
// Sampling text from a model, kept beside the model as nanoGPT keeps generate() by its GPT.
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "model/transformer.h"

namespace normlab::model {

// The next token from a row of logits: the most likely at temperature 0, else a draw from
// softmax(logits / temperature) restricted to the top_k most likely tokens (top_k 0 = all).
class Sampler {
 public:
  Sampler(int vocab, double temperature, int top_k, uint64_t seed);
  int32_t next(const float* logits);

 private:
  double temperature_;
  size_t k_;
  Rng rng_;
  std::vector<std::pair<float, int32_t>> ranked_;
  std::vector<double> weights_;
};

// Extends ids by `count` tokens through a decoding model (build_decoding_model for batch 1, chunk 1): every token
// is fed once, at its position, and the self-attention keys and values of the context stay in the model's caches,
// so a new token costs one pass over one position. The context is the last m.cache_capacity tokens; absolute
// positions cannot slide, so when the cache is full the last half of it is fed again from position 0 (the context
// then holds between half and all of the window; generate_uncached always holds the whole window).
// `done`, when given, is called with the number of tokens made so far after each one.
void generate(Model& m, std::vector<int32_t>& ids, int count, Sampler& sampler,
              const std::function<void(int64_t)>& done = {});

// The same by rerunning a model built for batch 1 on the last m.seq tokens for every new token (the tail padding of
// the window cannot reach the last real position because the model is causal): `normlab generate --no-cache`, and
// the reference the cached path is tested against.
void generate_uncached(Model& m, std::vector<int32_t>& ids, int count, Sampler& sampler,
                       const std::function<void(int64_t)>& done = {});

}  // namespace normlab::model
