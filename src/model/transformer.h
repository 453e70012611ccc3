#pragma once
// The Transformer of docs/model.md, assembled as one graph for a fixed [batch, seq] shape: embeddings,
// L blocks whose sub-layers follow the configured placement, final norm, head and loss. A decoder's attention is
// causal and its targets are the next tokens; an encoder's attention is bidirectional and its targets are the
// masked tokens (−1 elsewhere: the loss averages over the masked positions only). An encoder-decoder runs an
// encoder over the source and a decoder with cross-attention over the target; its targets are the target's next
// tokens (−1 on padding). Parameter tensors carry the documented names and their roles for initialization.
#include <array>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engine/graph.h"
#include "model/config.h"

namespace normlab::model {

// Where the probes look: the residual stream entering each layer (and leaving the last), and each
// sub-layer's branch output, whatever the placement. Recorded while the graph is built.
struct Landmarks {
  std::vector<engine::TensorId> layer_inputs;  // L + 1 entries: entering layer i, then the stack's output
  std::vector<std::array<engine::TensorId, 2>> branch_outputs;  // per layer: {attention, FFN}
};

struct Model {
  ModelConfig config;
  Landmarks landmarks;
  int batch = 0, seq = 0;
  int source_seq = 0;  // an encoder-decoder's source length: seq, except in a decoding model (its whole window)
  engine::Graph graph;
  engine::TensorId tokens = engine::kNoTensor, targets = engine::kNoTensor;
  // encoder_decoder only: the source [batch, seq] (padded) and its lengths [batch].
  engine::TensorId source = engine::kNoTensor, source_lengths = engine::kNoTensor;
  engine::TensorId logits = engine::kNoTensor, loss = engine::kNoTensor;
  engine::TensorId stream = engine::kNoTensor;  // a readout model's input (build_readout_model)
  // A decoding model only (build_decoding_model): how many positions its key-value caches hold, and the position of
  // the first token of its input chunk (i32 [1]).
  int cache_capacity = 0;
  engine::TensorId position = engine::kNoTensor;
  size_t decoder_first_node = 0;  // an encoder-decoder: where the decoder's nodes begin on the tape

  Model(const ModelConfig& c, int b, int t, engine::DType dtype) : config(c), batch(b), seq(t), graph(dtype) {}
  // Copies B·T token ids and targets into the graph's inputs.
  void set_batch(const int32_t* token_ids, const int32_t* target_ids);
  // An encoder-decoder's source: B·source_seq ids and B lengths, each in 1..source_seq.
  void set_source(const int32_t* source_ids, const int32_t* lengths);
  // A decoding model: the tokens of the next forward pass sit at positions first..first + seq − 1.
  void set_position(int first);
  // A decoding encoder-decoder: encode() runs the encoder over the current source (once per source), step() the
  // decoder over the current chunk (once per token). A decoder-only decoding model just steps.
  void encode();
  void step();
  // Beam search: row b's key-value caches become those of row from[b] (B entries).
  void reorder_cache(std::span<const int> from);
  // Sets every source length to T, so that a freshly planned encoder-decoder runs before its first set_source.
  void reset_source();
  // Forward only, on the current inputs; returns the loss. training = true turns dropout on; the
  // gradients come from graph.backward(loss) afterwards.
  double forward(bool training);
  double loss_value() const;
};

// Builds and plans the graph. Parameters are left at zero: call initialize() or load weights.
// skip_layer ≥ 0 leaves that layer out (its input passes straight on): the layer-drop probe.
std::unique_ptr<Model> build_model(const ModelConfig& config, int batch, int seq,
                                   engine::DType dtype = engine::DType::f32, int skip_layer = -1);
// The same, planned without gradients (Graph::set_gradients): forward only, in about half the memory. With
// `weights_of`, it reads that model's parameters in place (Graph::share_parameters_of; same config and float type,
// outliving this one) and holds no weights of its own: the layer-drop copies of a 7B model cost activations only.
std::unique_ptr<Model> build_inference_model(const ModelConfig& config, int batch, int seq,
                                             engine::DType dtype = engine::DType::f32, int skip_layer = -1,
                                             const Model* weights_of = nullptr);
// The same graph, not planned: nothing is allocated, so graph.lay_out() can size a model before it
// is known to fit in memory. graph.plan() makes it usable.
std::unique_ptr<Model> build_unplanned_model(const ModelConfig& config, int batch, int seq,
                                             engine::DType dtype = engine::DType::f32, int skip_layer = -1);
// A model for generation with a key-value cache: each pass reads `chunk` new tokens per row (tokens [batch, chunk])
// at positions p..p + chunk − 1 (Model::set_position(p)) and attends to every earlier position's keys and values,
// kept from earlier passes in caches of `capacity` (≤ model.max_seq_len) positions. Its logits equal the full
// model's at those positions as long as positions 0..p − 1 were fed before, in order. An encoder-decoder's source
// is `capacity` long and encoded once (encode()) before its decoder steps. Planned, with parameters at zero:
// copy_parameters() from a trained model, or read `weights_of`'s in place as build_inference_model does. Inference
// only: planned without gradients; `before_plan`, when given, runs on the unplanned model (to keep BF16 weights).
std::unique_ptr<Model> build_decoding_model(const ModelConfig& config, int batch, int capacity, int chunk = 1,
                                            engine::DType dtype = engine::DType::f32, const Model* weights_of = nullptr,
                                            const std::function<void(Model&)>& before_plan = {});
// The model's readout alone, for the logit lens (nostalgebraist 2020): the final norm, the head, the final soft-cap and
// the loss, over a stream of [batch, seq, stream width] given as the input `stream` (of `dtype`, the model's float
// type) instead of the layers' output. Its parameters have the full model's names (final_norm.*, lm_head.weight or the
// tied embed.tokens.weight), read in place from `weights_of` (as build_inference_model does). Planned without
// gradients; refused for an encoder-decoder. Fed the stack's output it computes the model's own logits and loss.
std::unique_ptr<Model> build_readout_model(const ModelConfig& config, int batch, int seq, engine::DType dtype,
                                           const Model& weights_of);
// Approximations for inference (`normlab eval` and `generate` options; issue 14's efficient-norm direction for long
// sequences), set on a built model: top-k sparse attention (each query keeps its attn_top_k largest logits; 0 = all)
// and sampled norm statistics (LayerNorm's μ and v, RMSNorm's mean square, from every norm_sample-th feature; 1 =
// all). Sampled statistics have no backward: such a model cannot train.
struct InferenceOptions {
  int attn_top_k = 0;
  int norm_sample = 1;
};
// Returns how many attention and how many LayerNorm/RMSNorm nodes it set.
std::pair<int, int> set_inference_options(Model& m, const InferenceOptions& options);
// Copies every parameter of `to` from the parameter of the same name in `from`, converting between
// precisions when the two models differ (an fp64 copy of an fp32 model).
void copy_parameters(const Model& from, Model& to);

}  // namespace normlab::model
