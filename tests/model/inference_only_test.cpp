// Inference-only models (Graph::set_gradients(false), build_inference_model): every placement and preset computes
// the same logits, bit for bit, as the trainable model of the same weights, with no gradient storage at all, and a
// backward pass on one is refused. eval, generate, translate and the probes that read activations open runs this way.
// Two savings on top, also bit for bit: weights a BF16 checkpoint holds stay bf16 (Graph::store_as_bf16, widened
// one node at a time), and the layer-drop, readout and decoding copies read the model's weights in place
// (Graph::share_parameters_of).
#include <gtest/gtest.h>

#include <bit>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/gemm.h"
#include "engine/ops.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "model/placement.h"
#include "model/presets.h"
#include "model/transformer.h"
#include "model/weights.h"

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

// m's weights rounded to bf16 in place, and written as a BF16 safetensors file (its bits, as a released checkpoint).
io::SafetensorsFile round_to_bf16_checkpoint(Model& m) {
  std::vector<std::vector<uint16_t>> bits;
  std::vector<io::TensorToWrite> entries;
  for (eng::TensorId id : m.graph.parameters()) {
    float* w = m.graph.data<float>(id);
    std::vector<uint16_t>& b = bits.emplace_back(static_cast<size_t>(m.graph.shape(id).numel()));
    for (size_t i = 0; i < b.size(); ++i) {
      w[i] = eng::round_to_bf16(w[i]);
      b[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(w[i]) >> 16);
    }
    const eng::Shape& shape = m.graph.shape(id);
    entries.push_back(
        {m.graph.spec(id).name, io::Dtype::BF16, {shape.dims.begin(), shape.dims.begin() + shape.rank}, b.data()});
  }
  return io::SafetensorsFile::parse(io::encode_safetensors(entries), "bf16 weights");
}

// An inference-only model that keeps a BF16 file's weights as bf16 computes what the fp32 model of the same (rounded)
// weights computes, bit for bit, in fewer weight bytes; a copy that reads its weights in place (here without a layer,
// as layer-drop builds it) agrees with one that copied them, and holds no weight bytes of its own.
void expect_bf16_storage_and_sharing_exact(const ModelConfig& config, const std::string& what) {
  auto fp32 = build_model(config, kBatch, kSeq);
  initialize(*fp32, 5);
  const io::SafetensorsFile file = round_to_bf16_checkpoint(*fp32);
  auto bf16 = build_unplanned_model(config, kBatch, kSeq);
  bf16->graph.set_gradients(false);
  EXPECT_EQ(keep_bf16_weights(*bf16, file), static_cast<int>(bf16->graph.parameters().size())) << what;
  const eng::ArenaSizes sizes = bf16->graph.lay_out();
  EXPECT_LT(sizes.parameters, sizes.parameters_in_float_type) << what;
  EXPECT_GT(sizes.widened, 0u) << what;
  bf16->graph.plan();
  bf16->reset_source();
  load_weights(*bf16, file);
  EXPECT_EQ(logits_of(*fp32), logits_of(*bf16)) << what;
  auto widened = build_inference_model(config, kBatch, kSeq);
  copy_parameters(*bf16, *widened);  // bf16 → fp32, exactly
  EXPECT_EQ(logits_of(*fp32), logits_of(*widened)) << what;
  const int skip = placement_of(config).stack ? -1 : 1;  // a placement with a stack of its own drops no layer
  for (const Model* owner : {static_cast<const Model*>(fp32.get()), static_cast<const Model*>(bf16.get())}) {
    auto shared = build_inference_model(config, kBatch, kSeq, eng::DType::f32, skip, owner);
    auto copied = build_inference_model(config, kBatch, kSeq, eng::DType::f32, skip);
    copy_parameters(*fp32, *copied);
    EXPECT_EQ(logits_of(*shared), logits_of(*copied)) << what << (owner == fp32.get() ? "" : ", sharing bf16 weights");
  }
  auto unplanned_copy = build_unplanned_model(config, kBatch, kSeq);
  unplanned_copy->graph.set_gradients(false);
  unplanned_copy->graph.share_parameters_of(bf16->graph);
  EXPECT_EQ(unplanned_copy->graph.lay_out().parameters, 0u) << what;
}

TEST(InferenceOnly, EveryPlacementComputesTheSameLogitsWithoutGradientStorage) {
  for (const Placement* p : all_placements())
    expect_same_function(small({{"placement", p->name}}), std::string(p->name));
}

TEST(InferenceOnly, EveryPresetComputesTheSameLogitsWithoutGradientStorage) {
  for (const Preset& p : all_presets()) expect_same_function(small(p.model), "preset " + p.name);
}

TEST(InferenceOnly, Bf16WeightsAndSharedWeightsComputeTheSameLogitsForEveryPlacementAndPreset) {
  for (const Placement* p : all_placements())
    expect_bf16_storage_and_sharing_exact(read_model_config(small({{"placement", p->name}}), std::string(p->name)),
                                          std::string(p->name));
  for (const Preset& p : all_presets())
    expect_bf16_storage_and_sharing_exact(read_model_config(small(p.model), p.name), "preset " + p.name);
}

// Only an inference-only fp32 graph may keep a parameter in bf16 or share another's: backward() would need fp32
// gradients of weights of its own.
TEST(InferenceOnly, Bf16OrSharedWeightsAreRefusedOnATrainableGraph) {
  const ModelConfig config = read_model_config(small({{"placement", "pre"}}), "test");
  auto owner = build_model(config, kBatch, kSeq);
  auto trainable = build_unplanned_model(config, kBatch, kSeq);
  EXPECT_THROW(trainable->graph.store_as_bf16(trainable->graph.parameters()[0]), Error);
  EXPECT_THROW(trainable->graph.share_parameters_of(owner->graph), Error);
  auto fp64 = build_unplanned_model(config, kBatch, kSeq, eng::DType::f64);
  fp64->graph.set_gradients(false);
  EXPECT_THROW(fp64->graph.store_as_bf16(fp64->graph.parameters()[0]), Error);
  auto inference = build_unplanned_model(config, kBatch, kSeq);
  inference->graph.set_gradients(false);
  inference->graph.store_as_bf16(inference->graph.parameters()[0]);
  inference->graph.set_gradients(true);
  EXPECT_THROW(inference->graph.plan(), Error);
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
