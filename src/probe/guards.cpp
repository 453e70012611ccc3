#include "probe/guards.h"

#include <cmath>

#include "probe/stats.h"

namespace normlab::probe {

namespace eng = normlab::engine;

std::string first_nonfinite(const eng::Graph& g) {
  for (const eng::Node& n : g.nodes())
    if (g.spec(n.out).dtype != eng::DType::i32 && !tensor_stats(g, n.out).finite)
      return g.spec(n.out).name + " (activation)";
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it)
    if (g.requires_grad(it->out) && !tensor_stats(g, it->out, true).finite) return g.spec(it->out).name + " (gradient)";
  for (eng::TensorId p : g.parameters())
    if (!tensor_stats(g, p, true).finite) return g.spec(p).name + " (parameter gradient)";
  return "";
}

std::string location_of(const std::string& tensor) {
  if (tensor.empty()) return "somewhere";
  if (tensor.starts_with("layers.")) return "in layer " + tensor.substr(7, tensor.find('.', 7) - 7);
  if (tensor.starts_with("embed")) return "before the first layer";
  if (tensor.starts_with("dlcl.")) return "in the layer combination";
  return "after the last layer";
}

bool parameters_finite(const eng::Graph& g) {
  for (eng::TensorId p : g.parameters())
    if (!tensor_stats(g, p).finite) return false;
  return true;
}

double SpikeDetector::observe(double x) {
  double z = 0;
  if (static_cast<int>(values_.size()) >= warmup_) {
    double mean = 0, var = 0;
    for (double v : values_) mean += v;
    mean /= static_cast<double>(values_.size());
    for (double v : values_) var += (v - mean) * (v - mean);
    const double sd = std::sqrt(var / static_cast<double>(values_.size()));
    z = sd > 0 ? (x - mean) / sd : 0;
  }
  if (!is_spike(z)) {
    values_.push_back(x);
    if (static_cast<int>(values_.size()) > window_) values_.pop_front();
  }
  return z;
}

}  // namespace normlab::probe
