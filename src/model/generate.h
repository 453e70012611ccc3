#pragma once
// Sampling text from a model, kept beside the model as nanoGPT keeps generate() by its GPT.
#include <cstdint>
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

// Extends ids by `count` tokens from a model built for one row (batch 1). The context is the last
// m.seq tokens; the window's tail padding cannot reach the last real position because the model is causal.
void generate(Model& m, std::vector<int32_t>& ids, int count, Sampler& sampler);

}  // namespace normlab::model
