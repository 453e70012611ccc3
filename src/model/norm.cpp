#include "model/norm.h"

#include <fmt/ranges.h>

#include "common/error.h"
#include "model/placement.h"

namespace normlab::model {

namespace eng = normlab::engine;

const NormType& find_norm_type(std::string_view name) {
  for (const NormType* t : all_norm_types())
    if (t->name == name) return *t;
  fail("unknown norm type '{}' (known: {})", name, fmt::join(norm_type_names(), ", "));
}

std::vector<std::string> norm_type_names() {
  std::vector<std::string> names;
  for (const NormType* t : all_norm_types()) names.emplace_back(t->name);
  return names;
}

const NormType* norm_type_of(eng::OpKind op) {
  if (op == eng::OpKind::count) return nullptr;
  for (const NormType* t : all_norm_types())
    if (t->op == op) return t;
  return nullptr;
}

TensorId make_norm(Graph& g, const ModelConfig& c, const std::string& name, TensorId x, NormSpec spec) {
  const NormType& type = find_norm_type(spec.type.empty() ? c.norm.type : spec.type);
  if (type.op == eng::OpKind::count) return type.build(g, {name, x, 0, false, -1, 0});
  // PB-relax rescales what every norm sees, whatever its type.
  if (option(c, "pb_relax").get<bool>()) x = eng::pb_relax(g, name + ".pb_relax", x);
  const double dyt_alpha = spec.dyt_alpha > 0 ? spec.dyt_alpha : option(c, "dyt_alpha").get<double>();
  return type.build(g, {name, x, spec.eps >= 0 ? spec.eps : c.norm.eps, c.norm.bias, spec.gain_init, dyt_alpha});
}

TensorId norm_gain(Graph& g, const NormArgs& a, double fallback) {
  return g.parameter(a.name + ".weight", eng::Shape{g.shape(a.x).last()}, eng::Role::norm_gain, false,
                     a.gain_init >= 0 ? a.gain_init : fallback);
}

TensorId norm_bias(Graph& g, const NormArgs& a) {
  return a.bias ? g.parameter(a.name + ".bias", eng::Shape{g.shape(a.x).last()}, eng::Role::norm_bias, false)
                : eng::kNoTensor;
}

double mean_of_saved(const Graph& g, TensorId id, bool reciprocal) {
  const int64_t n = g.shape(id).numel();
  double total = 0;
  eng::dispatch_float(g.float_type(), [&]<typename T>() {
    const T* d = g.data<T>(id);
    for (int64_t i = 0; i < n; ++i) total += reciprocal ? 1.0 / double(d[i]) : double(d[i]);
  });
  return total / static_cast<double>(std::max<int64_t>(n, 1));
}

}  // namespace normlab::model
