// NormFormer: Shleifer, Weston & Ott, "NormFormer: Improved Transformer Pretraining with Extra
// Normalization" (arXiv 2110.09456). §2.11
//
//   attn:  h ← h + LN_out(HeadScale(A(LN_in(h))))
//   ffn:   h ← λ ⊙ h + fc2(LN_mid(φ(fc1 LN_in(h))))
//
// Pre-LN plus three extra operations, each behind a switch. HeadScale follows the paper by default
// (γ_h on each head's output, before W_O); fairseq scales W_O's output split into H chunks instead,
// which is not equivalent (fairseq issue #3973).
//
// The paper trains decoder-only and masked LMs; in an encoder-decoder every self-attention and FFN sub-layer of
// both stacks takes the extra operations, and cross-attention is a plain Pre-LN sub-layer, as in fairseq's decoder
// layer (its encoder attention has neither HeadScale nor LN_out); `scale_cross` gives it both.
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
constexpr Switch kSwitches[] = {
    {"head_scale", "\"paper\"", "paper: γ_h on each head before W_O | fairseq: on W_O's output split in H chunks",
     "paper|fairseq"},
    {"scale_attn", "true", "LN on the attention output (--scale-attn)"},
    {"scale_heads", "true", "HeadScale (--scale-heads)"},
    {"scale_fc", "true", "LN after the FFN activation (--scale-fc)"},
    {"scale_resids", "true", "learnable λ on the FFN shortcut (--scale-resids)"},
    {"scale_cross", "false", "encoder-decoder only: HeadScale and LN_out on cross-attention too (fairseq: neither)"},
};

TensorId normformer(const SubLayer& s, TensorId h) {
  if (s.kind() == Branch::cross && !s.flag("scale_cross")) return pre_ln(s, h);
  if (s.kind() != Branch::ffn) {
    BranchStyle style;
    if (s.flag("scale_heads"))
      style.head_scale = s.text("head_scale") == "fairseq" ? HeadScale::fairseq : HeadScale::paper;
    TensorId y = s.branch(s.norm("in_norm", h), style);
    return s.add(h, s.flag("scale_attn") ? s.norm("out_norm", y) : y);
  }
  TensorId y = s.branch(s.norm("in_norm", h), {.mid_norm = s.flag("scale_fc")});
  if (!s.flag("scale_resids")) return s.add(h, y);
  return s.scale_add(y, h, s.vector("resid_scale", s.config().stream_width(), 1.0), "residual");
}
}  // namespace

extern const Placement kNormFormer{
    .name = "normformer",
    .display_name = "NormFormer",
    .paper = "Shleifer et al. 2021, NormFormer (arXiv 2110.09456)",
    .equations = "h = x + LN(HeadScale(Attn(LN(x))));  x' = λ ⊙ h + W2·LN(φ(W1·LN(h)))",
    .switches = kSwitches,
    .sublayer = normformer,
    .init_rule = "γ_h = 1, λ = 1",
    .notes =
        "HeadScale: paper form by default, fairseq's post-W_O form with head_scale = fairseq; encoder-decoder: "
        "cross-attention is Pre-LN (scale_cross = true adds HeadScale and LN_out)",
};

}  // namespace normlab::model
