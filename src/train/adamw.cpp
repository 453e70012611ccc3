#include "train/adamw.h"

#include <cmath>

namespace normlab::train {

namespace eng = normlab::engine;

AdamW::AdamW(eng::Graph& g) : g_(g) {
  for (eng::TensorId id : g.parameters()) {
    m_.emplace_back(static_cast<size_t>(g.shape(id).numel()), 0.0);
    v_.emplace_back(static_cast<size_t>(g.shape(id).numel()), 0.0);
  }
}

void AdamW::step(const AdamWSettings& s, double grad_scale, int t) {
  const double correction1 = 1 - std::pow(s.beta1, t), correction2 = 1 - std::pow(s.beta2, t);
  const auto& params = g_.parameters();
  for (size_t p = 0; p < params.size(); ++p) {
    const eng::TensorSpec& spec = g_.spec(params[p]);
    const double decay = spec.weight_decay ? s.lr * s.weight_decay : 0.0;
    const int64_t n = spec.shape.numel();
    double* m = m_[p].data();
    double* v = v_[p].data();
    eng::dispatch_float(g_.float_type(), [&]<typename T>() {
      T* w = g_.data<T>(params[p]);
      const T* grad = g_.grad<T>(params[p]);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const double gi = grad_scale * grad[i];
        m[i] = s.beta1 * m[i] + (1 - s.beta1) * gi;
        v[i] = s.beta2 * v[i] + (1 - s.beta2) * gi * gi;
        double wi = w[i] - decay * w[i];
        wi -= s.lr * (m[i] / correction1) / (std::sqrt(v[i] / correction2) + s.eps);
        w[i] = static_cast<T>(wi);
      }
    });
  }
}

double global_grad_norm(const eng::Graph& g) {
  double total = 0;
  for (eng::TensorId id : g.parameters()) {
    const int64_t n = g.shape(id).numel();
    eng::dispatch_float(g.float_type(), [&]<typename T>() {
      const T* grad = g.grad<T>(id);
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += static_cast<double>(grad[i]) * grad[i];
      total += s;
    });
  }
  return std::sqrt(total);
}

}  // namespace normlab::train
