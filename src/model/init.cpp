#include "model/init.h"

#include <cmath>
#include <numbers>

#include "model/crms_convert.h"
#include "model/placement.h"

namespace normlab::model {

namespace eng = normlab::engine;
using eng::Role;

namespace {

// What one parameter is drawn from.
struct Draw {
  enum Kind { constant, normal, truncated_normal, uniform } kind;
  double value;  // the constant, the std (σ before truncation), or the uniform bound
};

bool is_matrix(Role r) {
  return r == Role::q || r == Role::k || r == Role::v || r == Role::o || r == Role::fc1 || r == Role::gate ||
         r == Role::fc2 || r == Role::head;
}

double xavier_bound(const eng::TensorSpec& p) {  // uniform bound √(6/(fan_in + fan_out)), gain 1
  return std::sqrt(6.0 / static_cast<double>(p.shape[0] + p.shape[1]));
}

Draw xavier_draw(const eng::TensorSpec& p, double gain, bool normal) {  // normal: std = bound/√3
  const double bound = gain * xavier_bound(p);
  return normal ? Draw{Draw::normal, bound / std::sqrt(3.0)} : Draw{Draw::uniform, bound};
}

Draw base_draw(const Model& m, const eng::TensorSpec& p) {
  const InitConfig& init = m.config.init;
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(m.config.d_model));
  if (p.role == Role::embedding)  // embed_std = 0: d^(−1/2), fairseq's convention
    return {Draw::normal, init.embed_std > 0 ? init.embed_std : inv_sqrt_d};
  if (!is_matrix(p.role)) return {Draw::constant, p.init_value};  // gains, biases, scalars
  if (p.role == Role::head && init.head != "auto") {              // the untied head's own rule
    if (init.head == "normal") return {Draw::normal, init.head_std > 0 ? init.head_std : inv_sqrt_d};
    return xavier_draw(p, 1.0, init.head == "xavier_normal");
  }
  if (init.scheme == "xavier") return xavier_draw(p, 1.0, init.xavier == "normal");
  const bool residual_output = p.role == Role::o || p.role == Role::fc2;
  if (init.scheme == "scaled" && residual_output) {  // GPT-2's 1/√(2L) on the projections into the stream
    // L of the stack that holds p: an encoder-decoder's encoder has its own depth N.
    const bool in_encoder = m.config.encoder_decoder() && p.name.starts_with(StackSpec{StackSpec::encoder}.prefix());
    return {Draw::normal, init.std / std::sqrt(2.0 * (in_encoder ? m.config.source_layers() : m.config.n_layers))};
  }
  return {Draw::normal, init.std};
}

template <typename T>
void fill(T* data, int64_t n, Draw draw, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) {
    double v = draw.value;
    if (draw.kind == Draw::normal) v = draw.value * rng.normal();
    else if (draw.kind == Draw::truncated_normal) v = draw.value * truncated_normal(rng);
    else if (draw.kind == Draw::uniform) v = draw.value * (2.0 * rng.uniform() - 1.0);
    data[i] = static_cast<T>(v);
  }
}

void draw_into(Model& m, eng::TensorId id, Draw draw, uint64_t seed) {
  const eng::TensorSpec& p = m.graph.spec(id);
  Rng rng(hash_string(p.name, seed));
  eng::dispatch_float(m.graph.float_type(),
                      [&]<typename T>() { fill(m.graph.data<T>(id), p.shape.numel(), draw, rng); });
}

template <typename Fn>
void for_roles(Model& m, RoleSet roles, Fn fn, std::string_view under = "") {
  for (eng::TensorId id : m.graph.parameters())
    for (Role r : roles)
      if (m.graph.spec(id).role == r && m.graph.spec(id).name.starts_with(under)) fn(id);
}

}  // namespace

double truncated_normal(Rng& rng, double bound) {
  for (;;) {  // rejection: redraw until inside ±bound (3σ: 99.73% of draws are kept)
    const double z = rng.normal();
    if (std::abs(z) <= bound) return z;
  }
}

namespace {

// init.from_pre_ln: the Pre-LN model of the same sizes, drawn with the same seed, converted to this Pre-CRMSNorm one
// (crms_convert.h) in this model's precision, which then computes exactly that model's function.
void start_from_pre_ln(Model& m, uint64_t seed) {
  const std::unique_ptr<Model> pre_ln = build_model(pre_ln_config_for(m.config), 1, 1, m.graph.float_type());
  initialize(*pre_ln, seed);
  convert_pre_ln_to_crms(*pre_ln, m);
}

}  // namespace

void initialize(Model& m, uint64_t seed, const int32_t* tokens, const int32_t* targets) {
  if (m.config.init.from_pre_ln) return start_from_pre_ln(m, seed);
  for (eng::TensorId id : m.graph.parameters()) draw_into(m, id, base_draw(m, m.graph.spec(id)), seed);
  const Placement& placement = placement_of(m.config);
  if (!placement.init) return;
  std::vector<int32_t> random_tokens;
  if (!tokens) {  // rules that profile a forward pass get a random batch when no real one is given
    Rng rng(seed ^ 0x70c3e5);
    random_tokens.resize(static_cast<size_t>(m.batch * m.seq));
    for (auto& t : random_tokens) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(m.config.vocab_size));
    tokens = targets = random_tokens.data();
  }
  InitContext ctx{m, seed, tokens, targets};
  placement.init(ctx);
}

void scale_roles(Model& m, RoleSet roles, double factor, bool with_biases, std::string_view under) {
  auto scale = [&](eng::TensorId id) {
    eng::dispatch_float(m.graph.float_type(), [&]<typename T>() {
      T* d = m.graph.data<T>(id);
      for (int64_t i = 0; i < m.graph.shape(id).numel(); ++i) d[i] = static_cast<T>(d[i] * factor);
    });
  };
  for_roles(
      m, roles,
      [&](eng::TensorId id) {
        scale(id);
        const std::string& name = m.graph.spec(id).name;
        if (!with_biases || !name.ends_with(".weight")) return;
        eng::TensorId bias = m.graph.find(name.substr(0, name.size() - 7) + ".bias");
        if (bias != eng::kNoTensor) scale(bias);
      },
      under);
}

namespace {
void redraw(Model& m, RoleSet roles, Draw draw, uint64_t seed, std::string_view under = "") {
  for_roles(
      m, roles, [&](eng::TensorId id) { draw_into(m, id, draw, seed); }, under);
}
}  // namespace

void redraw_normal(Model& m, RoleSet roles, double std, uint64_t seed, std::string_view under) {
  redraw(m, roles, {Draw::normal, std}, seed, under);
}

void redraw_truncated_normal(Model& m, RoleSet roles, double std, uint64_t seed, std::string_view under) {
  redraw(m, roles, {Draw::truncated_normal, std}, seed, under);
}

void redraw_uniform(Model& m, RoleSet roles, double bound, uint64_t seed, std::string_view under) {
  redraw(m, roles, {Draw::uniform, bound}, seed, under);
}

void redraw_xavier(Model& m, RoleSet roles, double gain, bool normal, uint64_t seed, std::string_view under) {
  for_roles(
      m, roles, [&](eng::TensorId id) { draw_into(m, id, xavier_draw(m.graph.spec(id), gain, normal), seed); }, under);
}

void fill_constant(Model& m, const std::string& name, double value) {
  draw_into(m, m.graph.at(name), {Draw::constant, value}, 0);
}

std::vector<ParamStats> parameter_stats(const Model& m) {
  std::vector<ParamStats> out;
  for (eng::TensorId id : m.graph.parameters()) {
    const eng::TensorSpec& p = m.graph.spec(id);
    double sum = 0, sq = 0;
    const int64_t n = p.shape.numel();
    eng::dispatch_float(m.graph.float_type(), [&]<typename T>() {
      const T* d = m.graph.data<T>(id);
      for (int64_t i = 0; i < n; ++i) sum += d[i], sq += static_cast<double>(d[i]) * d[i];
    });
    const double mean = sum / static_cast<double>(n);
    out.push_back({p.name, eng::role_name(p.role), p.shape.str(), mean,
                   std::sqrt(std::max(0.0, sq / static_cast<double>(n) - mean * mean)),
                   std::sqrt(sq / static_cast<double>(n))});
  }
  return out;
}

}  // namespace normlab::model
