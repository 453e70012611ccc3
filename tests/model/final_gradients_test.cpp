// Graph::final_gradients_from(): the tail of the gradient block that no later step of the backward pass writes.
// Data-parallel training sums that tail over the ranks while the pass goes on (dist::OverlappedSum), so a tail
// declared final too early would sum a partial gradient. Here every tail is copied when the tape declares it
// final, and must equal the same bytes once the whole pass has run; the models cover tied embeddings (the table
// is read by the first node and the last), stack-level placements whose parameters span the stack (DLCL's weights,
// ResiDual's dual norm), fused norm nodes, and an encoder-decoder (the encoder's gradients finish last).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "generic_weights.h"
#include "model/config.h"
#include "model/transformer.h"

namespace normlab::model {
namespace {

namespace eng = normlab::engine;

constexpr int kBatch = 2, kSeq = 6, kVocab = 23;

std::unique_ptr<Model> built(Json model) {
  model.merge_patch(Json{
      {"vocab_size", kVocab}, {"d_model", 16}, {"n_heads", 2}, {"n_layers", 3}, {"d_ff", 24}, {"max_seq_len", kSeq}});
  auto m = build_model(read_model_config(model, "final gradients test"), kBatch, kSeq, eng::DType::f32);
  std::vector<int32_t> tokens(kBatch * kSeq), targets(kBatch * kSeq), lengths{4, kSeq};
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % kVocab);
    targets[i] = static_cast<int32_t>((i * 5 + 1) % kVocab);
  }
  if (m->config.encoder_decoder()) m->set_source(targets.data(), lengths.data());
  m->set_batch(tokens.data(), targets.data());
  init_generic(*m, 3);
  return m;
}

const std::vector<Json> kModels = {
    Json{{"placement", "pre"}},
    Json{{"placement", "pre"}, {"tied_embeddings", false}, {"activation", "swiglu"}, {"positions", "rope"}},
    Json{{"placement", "dlcl_pre"}},
    Json{{"placement", "residual"}},
    Json{{"placement", "pre_rms"}},  // its branches' last linear maps are centered (ops/linear.cpp)
    Json{{"placement", "normformer"}},
    Json{{"placement", "post"}, {"shape", "encoder_decoder"}, {"encoder_layers", 2}},
};

TEST(FinalGradients, NoGradientChangesAfterTheTapeDeclaresItFinal) {
  for (const Json& config : kModels) {
    SCOPED_TRACE(config.dump());
    auto m = built(config);
    const std::vector<size_t> from = m->graph.final_gradients_from();
    const std::span<std::byte> block = m->graph.gradient_block();
    ASSERT_EQ(from.size(), m->graph.nodes().size());
    EXPECT_EQ(from.front(), 0u) << "after the first node every gradient is final";
    EXPECT_LT(from[from.size() / 2], block.size()) << "a tail is final halfway through the pass";
    m->forward(true);
    m->graph.zero_param_grads();
    struct Snapshot {
      size_t offset;
      std::vector<std::byte> tail;
    };
    std::vector<Snapshot> snapshots;
    m->graph.backward(m->loss, 1.0, [&](size_t node) {
      const size_t offset = from[node];
      if (!snapshots.empty() && snapshots.back().offset == offset) return;
      snapshots.push_back(
          {offset, std::vector<std::byte>(block.begin() + static_cast<ptrdiff_t>(offset), block.end())});
    });
    EXPECT_GT(snapshots.size(), 3u);
    for (const Snapshot& s : snapshots)
      EXPECT_EQ(std::memcmp(s.tail.data(), block.data() + s.offset, s.tail.size()), 0)
          << "the tail from byte " << s.offset << " changed after it was declared final";
  }
}

// zero_param_grads() leaves each weight whose last reader on the tape is a linear map to that node's backward,
// which stores ∂L/∂W instead of adding it. Checked against the plain rule (the whole block zeroed, every write
// adding): with the block first filled with NaN, a gradient that was neither zeroed nor stored would show it, and
// an overwrite that came after another write would lose that write. A second backward() adds, as before.
TEST(FinalGradients, ZeroingLeavesEachWeightToItsFirstWriterInBackward) {
  for (const Json& config : kModels) {
    SCOPED_TRACE(config.dump());
    auto m = built(config);
    eng::Graph& g = m->graph;
    m->forward(true);
    const std::span<std::byte> block = g.gradient_block();
    std::memset(block.data(), 0, block.size());
    g.backward(m->loss);  // no zero_param_grads(): every write adds to the zeros above
    const std::vector<float> plain(reinterpret_cast<const float*>(block.data()),
                                   reinterpret_cast<const float*>(block.data() + block.size()));

    int stored = 0;
    for (const eng::Node& n : g.nodes()) stored += n.first_weight_grad_write;
    EXPECT_GE(stored, 4 * 3) << "each layer's linear weights are stored by their own backward";
    std::vector<float> nan(plain.size(), std::numeric_limits<float>::quiet_NaN());
    std::memcpy(block.data(), nan.data(), block.size());
    g.zero_param_grads();
    m->forward(true);
    g.backward(m->loss);
    const float* got = reinterpret_cast<const float*>(block.data());
    for (int pass = 1; pass <= 2; ++pass) {
      for (eng::TensorId p : g.parameters()) {
        const eng::TensorSpec& s = g.spec(p);
        const size_t first = s.grad_offset / sizeof(float), count = s.bytes() / sizeof(float);
        // Pass 1 is exact (a product stored, or added to zero); pass 2 adds a parameter's several writes one by one
        // to the first pass's sum, which rounds differently from doubling it.
        float largest = 0;
        for (size_t i = first; i < first + count; ++i) largest = std::max(largest, std::abs(plain[i]));
        const float tolerance = pass == 1 ? 0.0f : 1e-5f * largest;
        size_t differ = 0;
        for (size_t i = first; i < first + count; ++i) differ += !(std::abs(got[i] - pass * plain[i]) <= tolerance);
        EXPECT_EQ(differ, 0u) << s.name << " after backward pass " << pass << " (of " << count << " values)";
      }
      if (pass == 2) break;
      m->forward(true);
      g.backward(m->loss);  // a second micro-batch: every gradient adds
    }
  }
}

}  // namespace
}  // namespace normlab::model
