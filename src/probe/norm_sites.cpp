#include "probe/norm_sites.h"

#include <cmath>

#include "engine/ops.h"

namespace normlab::probe {

namespace eng = normlab::engine;

namespace {
bool is_norm(eng::OpKind k) {
  return k == eng::OpKind::layer_norm || k == eng::OpKind::rms_norm || k == eng::OpKind::scale_norm ||
         k == eng::OpKind::crms_norm || k == eng::OpKind::dyt;
}

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
    if (!is_norm(n.op)) continue;
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
  auto mean_saved = [&](eng::TensorId id, bool invert) {  // a per-row statistic, one value per row
    const int64_t n = g.shape(id).numel();
    double total = 0;
    eng::dispatch_float(g.float_type(), [&]<typename T>() {
      const T* d = g.data<T>(id);
      for (int64_t i = 0; i < n; ++i) total += invert ? 1.0 / double(d[i]) : double(d[i]);
    });
    return total / static_cast<double>(n);
  };
  switch (n.op) {
    case eng::OpKind::layer_norm: r.inv_sigma = mean_saved(n.saved[1], false); break;
    case eng::OpKind::rms_norm:
    case eng::OpKind::crms_norm: r.inv_sigma = mean_saved(n.saved[0], false); break;
    case eng::OpKind::scale_norm: {
      // y = g·x/‖x‖ = (g/√d)·x/rms(x): the Jacobian scale is g/‖x‖.
      double gain = 1;
      if (n.in[1] != eng::kNoTensor)
        eng::dispatch_float(g.float_type(), [&]<typename T>() { gain = *g.data<T>(n.in[1]); });
      r.inv_sigma = gain * mean_saved(n.saved[0], true);
      break;
    }
    default:
      eng::dispatch_float(g.float_type(), [&]<typename T>() { r.inv_sigma = *g.data<T>(n.in[1]); });  // DyT α
  }
  return r;
}

}  // namespace normlab::probe
