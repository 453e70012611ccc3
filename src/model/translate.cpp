#include "model/translate.h"

#include <algorithm>

#include "common/error.h"

namespace normlab::model {

namespace {
// The most likely token of one row of logits (fp32 or fp64 graph).
int32_t argmax_row(const Model& m, int64_t row) {
  const int64_t vocab = m.config.vocab_size;
  int32_t best = 0;
  engine::dispatch_float(m.graph.float_type(), [&]<typename T>() {
    const T* z = m.graph.data<T>(m.logits) + row * vocab;
    best = static_cast<int32_t>(std::max_element(z, z + vocab) - z);
  });
  return best;
}
}  // namespace

std::vector<std::vector<int32_t>> translate_greedy(Model& m, const std::vector<std::vector<int32_t>>& sources,
                                                   int32_t eos) {
  if (!m.config.encoder_decoder()) fail("translation needs an encoder-decoder (model.shape = encoder_decoder)");
  const int B = m.batch, T = m.seq;
  const auto n = static_cast<int64_t>(sources.size());
  std::vector<std::vector<int32_t>> out(sources.size());
  std::vector<int32_t> source(static_cast<size_t>(B * T)), lengths(static_cast<size_t>(B)), tokens(source.size()),
      targets(source.size(), -1);
  for (int64_t first = 0; first < n; first += B) {
    const int rows = static_cast<int>(std::min<int64_t>(B, n - first));
    std::fill(source.begin(), source.end(), eos);
    std::fill(tokens.begin(), tokens.end(), eos);
    std::vector<bool> done(static_cast<size_t>(B), false);
    for (int b = 0; b < B; ++b) {
      const auto& s = sources[static_cast<size_t>(b < rows ? first + b : first)];  // spare rows repeat the first
      if (static_cast<int>(s.size()) + 1 > T)
        fail("source {} has {} tokens; this model reads at most {} (train.seq_len − 1): shorten it", first + b,
             s.size(), T - 1);
      std::copy(s.begin(), s.end(), source.begin() + static_cast<std::ptrdiff_t>(b) * T);
      lengths[static_cast<size_t>(b)] = static_cast<int32_t>(s.size() + 1);
      done[static_cast<size_t>(b)] = b >= rows;
    }
    m.set_source(source.data(), lengths.data());
    for (int t = 0; t < T && !std::all_of(done.begin(), done.end(), [](bool d) { return d; }); ++t) {
      m.set_batch(tokens.data(), targets.data());
      m.forward(false);
      for (int b = 0; b < rows; ++b) {
        if (done[static_cast<size_t>(b)]) continue;
        const int32_t next = argmax_row(m, static_cast<int64_t>(b) * T + t);
        if (next == eos) {
          done[static_cast<size_t>(b)] = true;
          continue;
        }
        out[static_cast<size_t>(first + b)].push_back(next);
        if (t + 1 < T) tokens[static_cast<size_t>(b * T + t + 1)] = next;
      }
    }
  }
  return out;
}

}  // namespace normlab::model
