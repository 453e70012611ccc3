// Graph::final_gradients_from(): the tail of the gradient block that no later step of the backward pass writes.
// Data-parallel training sums that tail over the ranks while the pass goes on (dist::OverlappedSum), so a tail
// declared final too early would sum a partial gradient. Here every tail is copied when the tape declares it
// final, and must equal the same bytes once the whole pass has run; the models cover tied embeddings (the table
// is read by the first node and the last), stack-level placements whose parameters span the stack (DLCL's weights,
// ResiDual's dual norm), fused norm nodes, and an encoder-decoder (the encoder's gradients finish last).
#include <gtest/gtest.h>

#include <cstring>
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

TEST(FinalGradients, NoGradientChangesAfterTheTapeDeclaresItFinal) {
  const std::vector<Json> models = {
      Json{{"placement", "pre"}},
      Json{{"placement", "pre"}, {"tied_embeddings", false}, {"activation", "swiglu"}, {"positions", "rope"}},
      Json{{"placement", "dlcl_pre"}},
      Json{{"placement", "residual"}},
      Json{{"placement", "normformer"}},
      Json{{"placement", "post"}, {"shape", "encoder_decoder"}, {"encoder_layers", 2}},
  };
  for (const Json& config : models) {
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

}  // namespace
}  // namespace normlab::model
