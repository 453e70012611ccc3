#include "model/init.h"

#include <cmath>
#include <numbers>

namespace normlab::model {

namespace eng = normlab::engine;
using eng::Role;

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t hash_string(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ (seed * 0x9e3779b97f4a7c15ULL);
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

namespace {

// What one parameter is drawn from.
struct Draw {
  enum Kind { constant, normal, uniform } kind;
  double value;  // the constant, the std, or the uniform bound
};

bool is_matrix_role(Role r) {
  return r == Role::q || r == Role::k || r == Role::v || r == Role::o || r == Role::fc1 || r == Role::gate ||
         r == Role::fc2 || r == Role::head;
}

Draw draw_for(const Model& m, const eng::TensorSpec& p) {
  const InitConfig& init = m.config.init;
  switch (p.role) {
    case Role::norm_gain: return {Draw::constant, 1.0};
    case Role::norm_bias:
    case Role::bias: return {Draw::constant, 0.0};
    case Role::embedding: return {Draw::normal, init.embed_std};
    default: break;
  }
  if (!is_matrix_role(p.role)) return {Draw::constant, 0.0};
  if (init.scheme == "xavier") {
    const double fan_out = static_cast<double>(p.shape[0]), fan_in = static_cast<double>(p.shape[1]);
    return {Draw::uniform, std::sqrt(6.0 / (fan_in + fan_out))};
  }
  const bool residual_output = p.role == Role::o || p.role == Role::fc2;
  if (init.scheme == "scaled" && residual_output)  // GPT-2's 1/√(2L) on the projections into the stream
    return {Draw::normal, init.std / std::sqrt(2.0 * m.config.n_layers)};
  return {Draw::normal, init.std};
}

template <typename T>
void fill(T* data, int64_t n, Draw draw, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) {
    double v = draw.value;
    if (draw.kind == Draw::normal) v = draw.value * rng.normal();
    else if (draw.kind == Draw::uniform) v = draw.value * (2.0 * rng.uniform() - 1.0);
    data[i] = static_cast<T>(v);
  }
}

}  // namespace

void initialize(Model& m, uint64_t seed) {
  for (eng::TensorId id : m.graph.parameters()) {
    const eng::TensorSpec& p = m.graph.spec(id);
    Rng rng(hash_string(p.name, seed));
    Draw draw = draw_for(m, p);
    eng::dispatch_float(m.graph.float_type(), [&]<typename T>() { fill(m.graph.data<T>(id), p.shape.numel(), draw, rng); });
  }
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
                   std::sqrt(std::max(0.0, sq / static_cast<double>(n) - mean * mean)), std::sqrt(sq / static_cast<double>(n))});
  }
  return out;
}

}  // namespace normlab::model
