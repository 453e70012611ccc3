#include "model/placement.h"

#include <algorithm>

#include "common/error.h"
#include "model/formula.h"

namespace normlab::model {

namespace eng = normlab::engine;
using eng::Role;
using eng::Shape;

namespace {
constexpr Switch kCommonSwitches[] = {
    {"qk_norm", "\"none\"",
     "none | full (Norm over the whole q and k before the head split, OLMo-2) | per_head (Norm per head, "
     "HybridNorm/Gemma) | l2 (q/|q|, k/|k| per head and a learnable logit scale, Henry et al. 2020)",
     "none|full|per_head|l2"},
    {"v_norm", "false", "also a per-head Norm on v (HybridNorm)"},
    {"qkv_bias", "false", "biases on the q, k and v projections even when model.bias = false (Qwen2)"},
    {"qk_scale_init", "0", "initial logit scale g for qk_norm = l2; 0 = log2(T² − T) with T = max_seq_len"},
    {"attn_softcap", "0", "c·tanh(s/c) on attention logits; 0 = off (Gemma 2 uses 50)"},
    {"final_softcap", "0", "c·tanh(z/c) on the output logits; 0 = off (Gemma 2 uses 30)"},
    {"pb_relax", "false", "divide every norm's input by max|x|/8 over the whole tensor (CogView PB-relax, code form)"},
    {"dyt_alpha", "0.5", "initial α of every DyT norm (Zhu et al. 2025; x-transformers uses 1.0)"},
    {"dyt_alpha_attn", "0", "initial α of attention-input DyT norms; 0 = dyt_alpha (DyT-LLaMA 7B: 0.8)"},
    {"dyt_alpha_ffn", "0", "initial α of FFN-input DyT norms; 0 = dyt_alpha (DyT-LLaMA 7B: 0.2)"},
    {"dyt_alpha_final", "0", "initial α of the final DyT; 0 = dyt_alpha (DyT-LLaMA 7B: 0.2)"},
};
}  // namespace

std::span<const Switch> common_switches() { return kCommonSwitches; }

std::vector<std::string> switch_choices(const Placement& p, std::string_view name) {
  std::vector<std::string> choices;
  for (auto table : {common_switches(), p.switches})
    for (const Switch& s : table)
      if (s.name == name)
        for (size_t start = 0; start < s.choices.size();) {
          const size_t bar = std::min(s.choices.find('|', start), s.choices.size());
          choices.emplace_back(s.choices.substr(start, bar - start));
          start = bar + 1;
        }
  return choices;
}

Json option(const ModelConfig& c, const std::string& name) {
  if (auto it = c.options.find(name); it != c.options.end()) return *it;
  // A config built in code rather than read from JSON may leave switches out: use their defaults.
  for (auto table : {common_switches(), placement_of(c).switches})
    for (const Switch& s : table)
      if (s.name == name) return Json::parse(s.default_json);
  fail("internal: option '{}' has no default; declare it in the placement's switches", name);
}

PlacementRef::PlacementRef(std::shared_ptr<const Formula> formula) : formula_(std::move(formula)) {}

const Placement& PlacementRef::get() const { return formula_ ? formula_->placement() : *builtin_; }

std::string_view PlacementRef::name() const { return get().name; }

Json PlacementRef::json() const { return formula_ ? formula_->json() : Json(std::string(builtin_->name)); }

const Placement& placement_of(const ModelConfig& c) { return c.placement.get(); }

std::string_view branch_name(Branch b) { return b == Branch::attn ? "attn" : b == Branch::cross ? "cross" : "ffn"; }

std::vector<StackSpec> stacks(const ModelConfig& c) {
  if (!c.encoder_decoder()) return {StackSpec{.kind = StackSpec::single, .layers = c.n_layers}};
  return {StackSpec{.kind = StackSpec::encoder, .layers = c.source_layers()},
          StackSpec{.kind = StackSpec::decoder, .layers = c.n_layers}};
}

std::vector<SubLayerSite> sublayer_sites(const ModelConfig& c) {
  std::vector<SubLayerSite> sites;
  for (const StackSpec& t : stacks(c)) {
    const std::vector<Branch> branches = t.branches();
    for (int i = 0; i < t.layers; ++i)
      for (Branch b : branches)
        sites.push_back({fmt::format("{}layers.{}.{}", t.prefix(), i, branch_name(b)),
                         t.layers * static_cast<int>(branches.size())});
  }
  return sites;
}

SubLayer Stack::sublayer(int layer, Branch branch) const {
  return SubLayer(g_, config_, spec_, layer, branch, landmarks());
}

void Stack::mark_stream(int layer, TensorId x) const {
  if (!landmarks()) return;
  landmarks_.layer_inputs.resize(static_cast<size_t>(config_.n_layers + 1), eng::kNoTensor);
  landmarks_.layer_inputs[static_cast<size_t>(layer)] = x;
}

SubLayer::SubLayer(Graph& g, const ModelConfig& config, const StackSpec& spec, int layer, Branch branch,
                   Landmarks* landmarks)
    : g_(g), config_(config), spec_(spec), layer_(layer), branch_(branch), landmarks_(landmarks) {}

std::string SubLayer::prefix() const {
  return fmt::format("{}layers.{}.{}", spec_.prefix(), layer_, branch_name(branch_));
}

TensorId SubLayer::norm(const std::string& slot, TensorId x, NormSpec spec) const {
  if (spec.dyt_alpha < 0) {
    const double per_slot = number(branch_ == Branch::ffn ? "dyt_alpha_ffn" : "dyt_alpha_attn");
    if (per_slot > 0) spec.dyt_alpha = per_slot;
  }
  return make_norm(g_, config_, prefix() + "." + slot, x, spec);
}

TensorId SubLayer::add(TensorId a, TensorId b, double alpha, double beta, const std::string& name) const {
  return eng::add(g_, prefix() + "." + name, a, b, alpha, beta);
}

TensorId SubLayer::scale(TensorId x, double c, const std::string& name) const {
  return eng::scale(g_, prefix() + "." + name, x, c);
}

TensorId SubLayer::center(TensorId x, const std::string& name) const {
  return eng::center(g_, prefix() + "." + name, x);
}

TensorId SubLayer::scale_add(TensorId a, TensorId b, TensorId p, const std::string& name) const {
  const auto mode = g_.shape(p).numel() == 1 ? eng::ScaleMode::scalar : eng::ScaleMode::vector;
  return eng::scale_add(g_, prefix() + "." + name, a, b, p, mode);
}

TensorId SubLayer::gpas(TensorId x, TensorId gate, const std::string& name) const {
  return eng::gpas(g_, prefix() + "." + name, x, gate);
}

TensorId SubLayer::learnable(const std::string& name, Shape shape, double init) const {
  TensorId existing = g_.find(name);
  return existing != eng::kNoTensor ? existing : g_.parameter(name, shape, Role::scalar, false, init);
}

TensorId SubLayer::scalar(const std::string& name, double init, bool per_layer) const {
  return learnable(per_layer ? fmt::format("{}layers.{}.{}", spec_.prefix(), layer_, name) : prefix() + "." + name,
                   Shape{1}, init);
}

TensorId SubLayer::vector(const std::string& name, int64_t width, double init) const {
  return learnable(prefix() + "." + name, Shape{width}, init);
}

double SubLayer::number(const std::string& name) const { return option(config_, name).get<double>(); }
bool SubLayer::flag(const std::string& name) const { return option(config_, name).get<bool>(); }
std::string SubLayer::text(const std::string& name) const { return option(config_, name).get<std::string>(); }

}  // namespace normlab::model
