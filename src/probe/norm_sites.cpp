#include "probe/norm_sites.h"

#include <cmath>

#include "engine/ops.h"
#include "model/norm.h"

namespace normlab::probe {

namespace eng = normlab::engine;

namespace {
// Mean over rows of f(row), for a float tensor viewed as rows of its last axis.
template <typename Fn>
double mean_over_rows(const eng::Graph& g, eng::TensorId id, Fn f) {
  const int64_t rows = g.shape(id).rows(), width = g.shape(id).last();
  double total = 0;
  eng::dispatch_float(g.float_type(), [&]<typename T>() {
    const T* d = g.data<T>(id);
    for (int64_t r = 0; r < rows; ++r) total += f(d + r * width, width);
  });
  return total / static_cast<double>(std::max<int64_t>(rows, 1));
}
}  // namespace

std::vector<NormSite> norm_sites(const eng::Graph& g) {
  std::vector<NormSite> sites;
  for (const eng::Node& n : g.nodes()) {
    if (!model::norm_type_of(n.op)) continue;
    std::string name = g.spec(n.out).name;
    if (name.ends_with(".out")) name.resize(name.size() - 4);
    if (name.ends_with(".l2")) continue;  // QKNorm's unit-length step has no learnable scale to read
    sites.push_back({name, n.index});
  }
  return sites;
}

NormReading read_norm(const eng::Graph& g, const NormSite& site) {
  const eng::Node& n = g.nodes()[static_cast<size_t>(site.node)];
  const eng::TensorId x = n.in[0];
  NormReading r;
  r.input_rms = mean_over_rows(g, x, [](const auto* row, int64_t w) {
    double sq = 0;
    for (int64_t i = 0; i < w; ++i) sq += double(row[i]) * row[i];
    return std::sqrt(sq / static_cast<double>(w));
  });
  r.inv_sigma = model::norm_type_of(n.op)->inv_sigma(g, n);
  return r;
}

}  // namespace normlab::probe
