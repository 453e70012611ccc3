#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/error.h"

namespace normlab::model {

Sampler::Sampler(int vocab, double temperature, int top_k, uint64_t seed)
    : temperature_(temperature),
      k_(top_k > 0 ? std::min<size_t>(static_cast<size_t>(top_k), static_cast<size_t>(vocab))
                   : static_cast<size_t>(vocab)),
      rng_(seed),
      ranked_(static_cast<size_t>(vocab)),
      weights_(k_) {}

int32_t Sampler::next(const float* logits) {
  for (size_t v = 0; v < ranked_.size(); ++v) ranked_[v] = {logits[v], static_cast<int32_t>(v)};
  std::partial_sort(ranked_.begin(), ranked_.begin() + static_cast<std::ptrdiff_t>(k_), ranked_.end(),
                    std::greater<>());
  if (temperature_ <= 0) return ranked_[0].second;
  double total = 0;
  for (size_t i = 0; i < k_; ++i)
    total += (weights_[i] = std::exp((ranked_[i].first - ranked_[0].first) / temperature_));
  double u = rng_.uniform() * total;
  for (size_t i = 0; i < k_; ++i)
    if ((u -= weights_[i]) <= 0) return ranked_[i].second;
  return ranked_[0].second;  // u beyond the total by rounding
}

namespace {
// Row `row` of the logits as floats: a model trained in fp64 (train.precision) samples from its logits rounded to
// fp32, which sampling does not notice.
const float* logits_row(const Model& m, size_t row) {
  const size_t vocab = static_cast<size_t>(m.config.vocab_size);
  if (m.graph.float_type() == engine::DType::f32) return m.graph.data<float>(m.logits) + row * vocab;
  thread_local std::vector<float> rounded;
  const double* logits = m.graph.data<double>(m.logits) + row * vocab;
  rounded.assign(logits, logits + vocab);
  return rounded.data();
}
}  // namespace

void generate(Model& m, std::vector<int32_t>& ids, int count, Sampler& sampler,
              const std::function<void(int64_t)>& done) {
  if (m.batch != 1 || m.seq != 1 || m.cache_capacity < 1)
    fail("internal: generate needs a decoding model for batch 1 and chunk 1");
  if (ids.empty()) fail("internal: generate needs at least one token to continue");
  const size_t capacity = static_cast<size_t>(m.cache_capacity);
  size_t start = ids.size() - std::min(ids.size(), capacity);  // ids[start] sits at position 0
  size_t fed = start;                                          // ids[start..fed) are in the caches
  const int32_t unused_target = 0;
  for (int n = 0; n < count; ++n) {
    if (ids.size() - start > capacity) fed = start = ids.size() - std::max<size_t>(capacity / 2, 1);
    for (; fed < ids.size(); ++fed) {
      m.set_position(static_cast<int>(fed - start));
      m.set_batch(&ids[fed], &unused_target);
      m.forward(false);
    }
    ids.push_back(sampler.next(logits_row(m, 0)));
    if (done) done(n + 1);
  }
}

void generate_uncached(Model& m, std::vector<int32_t>& ids, int count, Sampler& sampler,
                       const std::function<void(int64_t)>& done) {
  if (m.batch != 1) fail("internal: generate needs a model built for batch 1, got {}", m.batch);
  const size_t window = static_cast<size_t>(m.seq);
  std::vector<int32_t> input(window), unused(window, 0);
  for (int n = 0; n < count; ++n) {
    const size_t context = std::min(ids.size(), window);
    std::fill(input.begin(), input.end(), 0);
    std::copy(ids.end() - static_cast<std::ptrdiff_t>(context), ids.end(), input.begin());
    m.set_batch(input.data(), unused.data());
    m.forward(false);
    ids.push_back(sampler.next(logits_row(m, context - 1)));
    if (done) done(n + 1);
  }
}

}  // namespace normlab::model
