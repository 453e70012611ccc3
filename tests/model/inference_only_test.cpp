// Inference-only models (Graph::set_gradients(false), build_inference_model): every placement and preset computes
// the same logits, bit for bit, as the trainable model of the same weights, with no gradient storage at all, and a
// backward pass on one is refused. eval, generate, translate and the probes that read activations open runs this way.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/ops.h"
#include "model/init.h"
#include "model/placement.h"
#include "model/presets.h"
#include "model/transformer.h"

namespace normlab::model {
namespace {

namespace eng = normlab::engine;

constexpr int kBatch = 2, kSeq = 6, kVocab = 23;

Json small(Json model) {
  model.merge_patch(Json{{"vocab_size", kVocab},
                         {"d_model", 16},
                         {"n_heads", 4},
                         {"n_layers", 3},
                         {"d_ff", 24},
                         {"max_seq_len", kSeq},
                         {"dropout", 0}});
  return model;
}

// One forward pass over fixed tokens (and, for an encoder-decoder, a fixed source).
std::vector<double> logits_of(Model& m) {
  std::vector<int32_t> tokens(kBatch * kSeq), targets(kBatch * kSeq), lengths(kBatch, kSeq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 1) % kVocab);
    targets[i] = static_cast<int32_t>((i * 3 + 4) % kVocab);
  }
  m.set_batch(tokens.data(), targets.data());
  if (m.config.encoder_decoder()) m.set_source(tokens.data(), lengths.data());
  m.forward(false);
  return eng::to_f64(m.graph, m.logits);
}

// The trainable model and the inference-only one, given the same weights, agree bit for bit; the latter lays out no
// gradient bytes.
void expect_same_function(const Json& model, const std::string& what) {
  const ModelConfig config = read_model_config(model, what);
  auto trainable = build_model(config, kBatch, kSeq);
  initialize(*trainable, 3);
  auto inference = build_inference_model(config, kBatch, kSeq);
  copy_parameters(*trainable, *inference);
  EXPECT_FALSE(inference->graph.has_gradients()) << what;
  EXPECT_EQ(logits_of(*trainable), logits_of(*inference)) << what;
  auto unplanned = build_unplanned_model(config, kBatch, kSeq);
  unplanned->graph.set_gradients(false);
  const eng::ArenaSizes sizes = unplanned->graph.lay_out();
  EXPECT_EQ(sizes.parameter_grads, 0u) << what;
  EXPECT_EQ(sizes.activation_grads, 0u) << what;
  EXPECT_GT(sizes.parameters, 0u) << what;
  EXPECT_TRUE(inference->graph.gradient_block().empty()) << what;
}

TEST(InferenceOnly, EveryPlacementComputesTheSameLogitsWithoutGradientStorage) {
  for (const Placement* p : all_placements())
    expect_same_function(small({{"placement", p->name}}), std::string(p->name));
}

TEST(InferenceOnly, EveryPresetComputesTheSameLogitsWithoutGradientStorage) {
  for (const Preset& p : all_presets()) expect_same_function(small(p.model), "preset " + p.name);
}

TEST(InferenceOnly, ABackwardPassIsRefused) {
  const ModelConfig config = read_model_config(small({{"placement", "pre"}}), "test");
  auto m = build_inference_model(config, kBatch, kSeq);
  logits_of(*m);
  try {
    m->graph.backward(m->loss);
    FAIL() << "backward ran on a graph without gradients";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("planned without gradients"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m->graph.zero_param_grads(), Error);
  auto trainable = build_unplanned_model(config, kBatch, kSeq);
  EXPECT_EQ(trainable->graph.lay_out().parameter_grads, trainable->graph.lay_out().parameters)
      << "a trainable graph keeps one gradient per parameter";
}

}  // namespace
}  // namespace normlab::model
