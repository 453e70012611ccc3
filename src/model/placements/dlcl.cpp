// DLCL, dynamic linear combination of layers: Wang et al., "Learning Deep Transformer Models for
// Machine Translation", ACL 2019 (arXiv 1906.01787). §2.3
//
//   pre:   x_l = Σ_{k≤l} W[l,k] · N_k(y_k)       (N_0 = identity; each later output has its own norm)
//   post:  x_l = N_l(Σ_{k≤l} W[l,k] · y_k)       (no norm on the first input)
//   y_{l+1} = Block_l(x_l)                        (ordinary Pre-LN / Post-LN blocks)
//
// y_0 is the embedding output; after the last block the same combination over all L+1 entries gives
// the output (then the final norm for pre). W is learnable, lower-triangular, row l = 1/(l+1) at init.
// An encoder-decoder's encoder and decoder each have their own W and norms (`encoder.dlcl.*`, `decoder.dlcl.*`),
// as in the paper's code; a decoder block is self-attention, cross-attention, FFN.
#include <vector>

#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {

// Σ_{k≤row} W[row, k] · inputs[k], W = dlcl.weights [L+1, L+1].
TensorId combine(const Stack& st, TensorId weights, const std::vector<TensorId>& inputs, int row) {
  const int64_t width = st.layers() + 1;
  TensorId sum = engine::kNoTensor;
  for (int k = 0; k <= row; ++k)
    sum = engine::scale_add(st.graph(), st.name(fmt::format("dlcl.sum.{}.{}", row, k)), sum,
                            inputs[static_cast<size_t>(k)], weights, engine::ScaleMode::scalar, row * width + k);
  return sum;
}

TensorId weights_of(const Stack& st) {
  const int64_t n = st.layers() + 1;
  return st.graph().parameter(st.name("dlcl.weights"), engine::Shape{n, n}, engine::Role::scalar, false);
}

TensorId block(const Stack& st, int layer, TensorId x, TensorId (*sublayer)(const SubLayer&, TensorId)) {
  for (Branch b : st.spec().branches()) x = sublayer(st.sublayer(layer, b), x);
  return x;
}

TensorId dlcl_pre_stack(const Stack& st, TensorId y0) {
  TensorId weights = weights_of(st);
  std::vector<TensorId> normed{y0};
  for (int l = 0; l < st.layers(); ++l) {
    TensorId x = combine(st, weights, normed, l);
    st.mark_stream(l, x);
    TensorId y = block(st, l, x, pre_ln);
    normed.push_back(st.norm(fmt::format("dlcl.norms.{}", l), y));
  }
  return combine(st, weights, normed, st.layers());
}

TensorId dlcl_post_stack(const Stack& st, TensorId y0) {
  TensorId weights = weights_of(st);
  std::vector<TensorId> outputs{y0};
  auto input = [&](int row) {
    TensorId sum = combine(st, weights, outputs, row);
    return row == 0 ? sum : st.norm(fmt::format("dlcl.norms.{}", row - 1), sum);
  };
  for (int l = 0; l < st.layers(); ++l) {
    TensorId x = input(l);
    st.mark_stream(l, x);
    outputs.push_back(block(st, l, x, post_ln));
  }
  return input(st.layers());
}

void average_rows(InitContext& ctx) {
  Model& m = ctx.model;
  for (const StackSpec& stack : stacks(m.config)) {
    const int n = stack.layers + 1;
    engine::dispatch_float(m.graph.float_type(), [&]<typename T>() {
      T* w = m.graph.data<T>(m.graph.at(stack.prefix() + "dlcl.weights"));
      for (int l = 0; l < n; ++l)
        for (int k = 0; k < n; ++k) w[l * n + k] = k <= l ? T(1) / static_cast<T>(l + 1) : T(0);
    });
  }
}
}  // namespace

extern const Placement kDlclPre{
    .name = "dlcl_pre",
    .display_name = "DLCL (Pre-LN)",
    .paper = "Wang et al. 2019, Learning Deep Transformer Models for Machine Translation (arXiv 1906.01787)",
    .equations = "x_l = Σ_k W[l,k]·LN_k(y_k);  y_{l+1} = PreLNBlock(x_l);  output Σ_k W[L,k]·LN_k(y_k), final norm",
    .stack = dlcl_pre_stack,
    .init = average_rows,
    .init_rule = "W row l = 1/(l+1) over k ≤ l (\"avg\")",
    .notes = "scalar granularity, no row softmax, unlimited window (the code's defaults)",
};

extern const Placement kDlclPost{
    .name = "dlcl_post",
    .display_name = "DLCL (Post-LN)",
    .paper = "Wang et al. 2019, Learning Deep Transformer Models for Machine Translation (arXiv 1906.01787)",
    .equations = "x_l = LN_l(Σ_k W[l,k]·y_k);  y_{l+1} = PostLNBlock(x_l);  output LN(Σ_k W[L,k]·y_k)",
    .final_norm = false,
    .stack = dlcl_post_stack,
    .init = average_rows,
    .init_rule = "W row l = 1/(l+1) over k ≤ l (\"avg\")",
};

}  // namespace normlab::model
