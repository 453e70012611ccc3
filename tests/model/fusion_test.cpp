// engine.fuse on whole models: every placement computes the same logits and gradients, bit for bit, with the
// fused pairs (engine/fusion.h; the default) and run op by op. The placements whose stream is normalized right
// after each residual add (Pre-LN, Post-LN, Pre-RMSNorm, Pre-CRMSNorm) get an add + norm pair per sub-layer,
// and every GELU FFN a linear + GELU pair.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "model/init.h"
#include "model/placement.h"
#include "model/transformer.h"

namespace normlab::model {
namespace {

namespace eng = normlab::engine;

constexpr int kBatch = 2, kSeq = 6, kVocab = 23, kLayers = 3;

struct Outcome {
  int pairs = 0, add_norm_pairs = 0;
  std::vector<double> values;  // logits, then every parameter's gradient
};

Outcome run(const std::string& placement, bool fuse) {
  const Json config{{"vocab_size", kVocab}, {"d_model", 16}, {"n_heads", 4},        {"n_layers", kLayers},
                    {"d_ff", 24},           {"dropout", 0},  {"max_seq_len", kSeq}, {"placement", placement}};
  auto m = build_unplanned_model(read_model_config(config, "fusion test"), kBatch, kSeq);
  m->graph.set_fusion(fuse);
  m->graph.plan();
  initialize(*m, 5);
  std::vector<int32_t> tokens(kBatch * kSeq), targets(kBatch * kSeq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 1) % kVocab);
    targets[i] = static_cast<int32_t>((i * 3 + 4) % kVocab);
  }
  m->set_batch(tokens.data(), targets.data());
  m->graph.zero_param_grads();
  m->forward(true);
  m->graph.backward(m->loss);
  Outcome o;
  o.pairs = m->graph.fused_pairs();
  for (const eng::Node& n : m->graph.nodes())
    o.add_norm_pairs += n.fused_with_next && n.fused_op != eng::OpKind::linear_gelu;
  o.values = eng::to_f64(m->graph, m->logits);
  for (eng::TensorId p : m->graph.parameters())
    for (double v : eng::to_f64(m->graph, p, true)) o.values.push_back(v);
  return o;
}

TEST(Fusion, EveryPlacementTrainsIdenticallyFusedAndUnfused) {
  int placements_with_pairs = 0;
  for (const Placement* p : all_placements()) {
    const std::string name(p->name);
    const Outcome fused = run(name, true), unfused = run(name, false);
    EXPECT_EQ(unfused.pairs, 0) << name;
    placements_with_pairs += fused.pairs > 0;
    ASSERT_EQ(fused.values.size(), unfused.values.size()) << name;
    size_t differing = 0;
    for (size_t i = 0; i < fused.values.size(); ++i) differing += fused.values[i] != unfused.values[i];
    EXPECT_EQ(differing, 0u) << name << " (" << fused.pairs << " fused pairs)";
  }
  EXPECT_GE(placements_with_pairs, 3);
  // One add + norm pair per sub-layer: Post-LN's Norm(x + F(x)); Pre-LN's h + F(…) opening the next sub-layer
  // (the last one the final norm). One linear + GELU pair per FFN.
  for (const char* placement : {"pre", "post", "pre_rms", "pre_crms"}) {
    const Outcome o = run(placement, true);
    EXPECT_EQ(o.add_norm_pairs, 2 * kLayers) << placement;
    EXPECT_EQ(o.pairs, 3 * kLayers) << placement;
  }
}

}  // namespace
}  // namespace normlab::model
