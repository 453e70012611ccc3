#pragma once
// Norm types: what `model.norm.type` (or a placement's per-slot override) can name. Each type is one
// file in norms/ holding its paper, its equation, its parameters with their initial values, the
// builder that records it on the tape, and the reader of its Jacobian scale (1/σ) for the probes;
// norms/registry.cpp lists the types, one line each. Config validation, `normlab variants` and the
// probes' norm sites are loops over that list.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/graph.h"
#include "engine/ops.h"
#include "model/config.h"

namespace normlab::model {

using engine::Graph;
using engine::TensorId;

// Overrides of the configured norm for one slot.
struct NormSpec {
  std::string type;       // empty = model.norm.type
  double eps = -1;        // < 0 = model.norm.eps
  double gain_init = -1;  // < 0 = the type's default (1, or 0 for rmsnorm_gemma)
  double dyt_alpha = -1;  // < 0 = options.dyt_alpha
};

// What a builder gets: the norm's name (its parameters are `name.weight`, `name.bias`, `name.alpha`),
// its input (normalized over the last axis) and the resolved settings.
struct NormArgs {
  const std::string& name;
  TensorId x;
  double eps;
  bool bias;         // model.norm.bias: LayerNorm and DyT add β
  double gain_init;  // < 0 = the type's default
  double dyt_alpha;  // DyT's initial α
};

// One learnable parameter of a norm type, for the help text.
struct NormParam {
  std::string_view suffix;  // weight | bias | alpha
  std::string_view init;    // its initial value, in words
};

struct NormType {
  std::string_view name;
  std::string_view paper;     // citation
  std::string_view equation;  // one line
  std::span<const NormParam> params = {};
  // The op it records; OpKind::count for `none`, which records nothing.
  engine::OpKind op = engine::OpKind::count;
  TensorId (*build)(Graph& g, const NormArgs& a) = nullptr;
  // The mean over rows of the norm's Jacobian scale: 1/σ (1/RMS; g/‖x‖ for ScaleNorm; α, the slope at
  // 0, for DyT), read from a recorded node of `op` after a forward pass.
  double (*inv_sigma)(const Graph& g, const engine::Node& n) = nullptr;
};

const NormType& find_norm_type(std::string_view name);  // throws normlab::Error listing the known names
std::span<const NormType* const> all_norm_types();
std::vector<std::string> norm_type_names();
// The norm type that records op (the first registered, e.g. rmsnorm for rms_norm); nullptr if none does.
const NormType* norm_type_of(engine::OpKind op);

// The configured norm of `name` over the last axis of x, with the slot's overrides.
TensorId make_norm(Graph& g, const ModelConfig& c, const std::string& name, TensorId x, NormSpec spec = {});

// For builders: the gain γ (`name.weight`, width of x) starting at a.gain_init or `fallback`, and the
// bias β (`name.bias`) when a.bias holds (else kNoTensor).
TensorId norm_gain(Graph& g, const NormArgs& a, double fallback);
TensorId norm_bias(Graph& g, const NormArgs& a);
// For readers: the mean over rows of a per-row saved statistic (or of its reciprocal).
double mean_of_saved(const Graph& g, TensorId id, bool reciprocal = false);

}  // namespace normlab::model
