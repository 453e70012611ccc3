#include "probe/stats.h"

#include <algorithm>
#include <vector>

namespace normlab::probe {

namespace {
template <typename Value>
TensorStats stats_of(int64_t n, Value value) {
  double sq = 0, mx = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    const double v = value(i);
    finite = finite && std::isfinite(v);
    sq += v * v;
    mx = std::max(mx, std::abs(v));
  }
  return {sq / static_cast<double>(std::max<int64_t>(n, 1)), mx, finite};
}
}  // namespace

TensorStats tensor_stats(const engine::Graph& g, engine::TensorId id, bool grad) {
  const int64_t n = g.shape(id).numel();
  if (!grad && g.spec(id).dtype == engine::DType::bf16) {  // a weight kept as a BF16 checkpoint holds it
    const auto* bits = g.data<uint16_t>(id);
    return stats_of(n, [&](int64_t i) { return static_cast<double>(engine::bf16_to_float(bits[i])); });
  }
  TensorStats s;
  engine::dispatch_float(g.float_type(), [&]<typename T>() {
    const T* d = grad ? g.grad<T>(id) : g.data<T>(id);
    s = stats_of(n, [&](int64_t i) { return static_cast<double>(d[i]); });
  });
  return s;
}

}  // namespace normlab::probe
