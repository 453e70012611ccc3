#pragma once
// A placement says where the norms go in a block. Each variant is one file in placements/ whose
// sublayer() reads like the variant's equation, written with the verbs of SubLayer below, plus
// one line in placements/registry.cpp. The two sub-layers of block ℓ (attention, then FFN) each
// call sublayer(s, h) to turn the residual stream h into the next h.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/graph.h"
#include "model/config.h"

namespace normlab::model {

using engine::Graph;
using engine::TensorId;

enum class Branch { attn, ffn };

// The verbs a placement may use inside one sub-layer. Names of created tensors follow
// docs/model.md: parameters `layers.{i}.{attn|ffn}.{slot}.weight`, activations `...{slot}.out`.
class SubLayer {
 public:
  SubLayer(Graph& g, const ModelConfig& config, int layer, Branch branch);

  int layer() const { return layer_ + 1; }         // ℓ, counted from 1 as in the papers
  int layers() const { return config_.n_layers; }  // L
  Branch branch_kind() const { return branch_; }
  const ModelConfig& config() const { return config_; }
  Graph& graph() const { return g_; }
  std::string prefix() const;  // "layers.{i}.attn" or "layers.{i}.ffn"

  // The configured norm (model.norm), with its own parameters under `prefix.slot`.
  TensorId norm(const std::string& slot, TensorId x) const;
  // The sub-layer's function F: attention or feed-forward, with dropout on its output.
  TensorId branch(TensorId x) const;
  // α·a + β·b (the residual add and its scaled forms).
  TensorId add(TensorId a, TensorId b, double alpha = 1.0, double beta = 1.0, const std::string& name = "residual") const;
  TensorId scale(TensorId x, double c, const std::string& name) const;

 private:
  Graph& g_;
  const ModelConfig& config_;
  int layer_;
  Branch branch_;
};

struct Placement {
  std::string_view name;
  std::string_view paper;      // citation
  std::string_view equations;  // one line per sub-layer, as in the spec
  bool final_norm;             // default for model.final_norm = "auto"
  TensorId (*sublayer)(const SubLayer& s, TensorId h);
};

const Placement& find_placement(std::string_view name);  // throws normlab::Error listing the known names
std::span<const Placement> all_placements();
std::vector<std::string> placement_names();

}  // namespace normlab::model
