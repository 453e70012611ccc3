#include "probe/stats.h"

#include <algorithm>
#include <vector>

namespace normlab::probe {

TensorStats tensor_stats(const engine::Graph& g, engine::TensorId id, bool grad) {
  TensorStats s;
  const int64_t n = g.shape(id).numel();
  engine::dispatch_float(g.float_type(), [&]<typename T>() {
    const T* d = grad ? g.grad<T>(id) : g.data<T>(id);
    double sq = 0, mx = 0;
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) {
      const double v = d[i];
      finite = finite && std::isfinite(v);
      sq += v * v;
      mx = std::max(mx, std::abs(v));
    }
    s = {sq / static_cast<double>(std::max<int64_t>(n, 1)), mx, finite};
  });
  return s;
}

}  // namespace normlab::probe
