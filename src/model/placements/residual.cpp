// ResiDual: Xie et al., "ResiDual: Transformer with Dual Residual Connections" (arXiv 2304.14802). §2.14
//
//   per sub-layer:  f = F(x);  d ← d + f;  x ← LN(x + f)          (x starts as the embedding, d too)
//   output:         α·x + LN_dual(d)
//
// Two streams: a Post-LN stream that keeps Post-LN's representation, and an un-normalized dual
// stream whose own final norm carries Pre-LN's direct gradient path to every layer. In an encoder-decoder each
// stack carries its own pair of streams, and a decoder layer's cross-attention is one more sub-layer of the same
// form (the code's decoder layer); the encoder's output α·x + LN_dual(d) is what cross-attention reads.
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
constexpr Switch kSwitches[] = {{"residual_alpha", "1.0", "α on the Post-LN stream at the output"}};

TensorId residual_stack(const Stack& st, TensorId x) {
  TensorId dual = x;
  for (int layer = 0; layer < st.layers(); ++layer) {
    st.mark_stream(layer, x);  // the Post-LN stream; the dual stream is `layers.{i}.{s}.dual`
    for (Branch b : st.spec().branches()) {
      SubLayer s = st.sublayer(layer, b);
      TensorId f = s.branch(x);
      dual = s.add(dual, f, 1, 1, "dual");
      x = s.norm("post_norm", s.add(x, f));
    }
  }
  const double alpha = option(st.config(), "residual_alpha").get<double>();
  return st.add("residual.out", x, st.norm("dual_norm", dual, {.eps = 1e-7}), alpha, 1.0);
}
}  // namespace

extern const Placement kResiDual{
    .name = "residual",
    .display_name = "ResiDual",
    .paper = "Xie et al. 2023, ResiDual: Transformer with Dual Residual Connections (arXiv 2304.14802)",
    .equations = "f = F(x); d = d + f; x = LN(x + f) per sub-layer;  output α·x + LN(d)",
    .final_norm = false,
    .switches = kSwitches,
    .stack = residual_stack,
    .notes = "the dual stream's final LN uses ε = 1e-7, as the code",
};

}  // namespace normlab::model
