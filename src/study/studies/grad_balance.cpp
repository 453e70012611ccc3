// Gradient balance across depth during training. NormFormer (Shleifer et al. 2021, §3, Fig. 2):
// Pre-LN's early layers get much larger gradients than its late layers, and NormFormer's extra norms
// and scales even them out. Mix-LN (Li et al. 2025) puts Post-LN in the first layers for the same
// reason; HybridNorm (Zhuo et al. 2025: QKV-norm in attention, Post-LN FFN) claims the same balance.

#include "probe/records.h"
#include "study/kit.h"
#include "study/statistics.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// The preset as --set leaves it (model.n_layers, train.steps; the probe interval scales with the steps).
TrainPreset preset(const StudyOptions& o) {
  return configured(o, o.quick ? TrainPreset{4, 30, 10} : TrainPreset{12, 400, 40});
}

constexpr Arm kArms[] = {
    {"pre", "Pre-LN"}, {"normformer", "NormFormer"}, {"mixln", "Mix-LN"}, {"hybridnorm", "HybridNorm"}};

std::vector<RunRequest> plan(const StudyOptions& o) {
  const TrainPreset p = preset(o);
  return placement_runs(o.seeds, kArms, p, p.steps / 10);
}

// ---- The pre-registration ------------------------------------------------------------------------------------------

// The fc2 gradient's first-layer ÷ last-layer ratio early in training, or its imbalance |ln(ratio)|.
Term fc2_balance(std::string arm, const char* form) {
  return {std::move(arm), "first_over_last_layer", {{"tensor", "ffn.fc2.weight"}, {"form", form}}};
}

// A placement's imbalance against Pre-LN's, below zero when it balances the gradient better.
ClaimSpec balances(std::string id, const std::string& arm, const std::string& label, std::string quote,
                   std::string where) {
  return {.id = std::move(id),
          .statement = label + " balances the gradient across depth",
          .quote = std::move(quote),
          .where = std::move(where),
          .of = fc2_balance(arm, "abs_log"),
          .against = fc2_balance("pre", "abs_log"),
          .compare = Compare::difference,
          .side = SubClaim::Side::below,
          .threshold = 0.0};
}

const std::vector<ArmSpec> kClaimArms = {
    {"pre", "Pre-LN"}, {"normformer", "NormFormer"}, {"mixln", "Mix-LN"}, {"hybridnorm", "HybridNorm"}};

const std::vector<ClaimSpec> kSubClaims = {
    {.id = "A",
     .statement = "Pre-LN's early layers receive much larger gradients than its late layers",
     .quote = "During pretraining, the Pre-LayerNorm transformer suffers from a gradient magnitude mismatch: gradients "
              "at early layers are much larger than at later layers.",
     .where = "Shleifer et al. 2021, NormFormer, abstract; §3, Fig. 2",
     .of = fc2_balance("pre", "ratio"),
     .threshold = 1.5},
    balances("B", "normformer", "NormFormer",
             "These issues can be alleviated by our proposed NormFormer architecture, which adds three normalization "
             "operations to each layer: a Layer Norm after self attention, head-wise scaling of self-attention "
             "outputs, and a Layer Norm after the first fully connected layer.",
             "Shleifer et al. 2021, NormFormer, abstract; Fig. 2"),
    balances("C", "mixln", "Mix-LN",
             "Mix-LN applies Post-LN to the earlier layers and Pre-LN to the deeper layers, ensuring more uniform "
             "gradients across layers.",
             "Li et al. 2025, Mix-LN, abstract (v2)"),
    balances("D", "hybridnorm", "HybridNorm",
             "We provide both theoretical insights and empirical evidence demonstrating that HybridNorm improves "
             "gradient flow and model robustness.",
             "Zhuo et al. 2025, HybridNorm, abstract (v3); Fig. 2"),
};

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  Report r;
  r.setup =
      "Each placement's default init; the gradient norm of each layer's FFN fc2 weight, averaged over the probes "
      "(every train.probe_every steps) of the first quarter of training.";
  Chart chart{"fc2 gradient norm per layer, early in training (one seed)", "layer", "‖∂L/∂W_fc2‖"};
  chart.log_y = true;
  Table table{"Balance (over seeds)", {"placement", "first ÷ last", "|ln(first ÷ last)|", "val loss"}};
  for (const Arm& a : kArms) {
    const std::vector<double> shown =
        early_layer_means(find_run(runs, seed_id(a.id, o.seeds.front())), "ffn.fc2.weight", probe::field::grad_norm);
    chart.series.push_back(indexed_series(fmt::format("{} (seed {})", a.label, o.seeds.front()), shown));
    const auto values = [&](const char* form) {
      return measure_term(fc2_balance(a.id, form), Json::object(), runs, o.seeds).show();
    };
    table.rows.push_back({a.label, values("ratio"), values("abs_log"), val_losses(runs, a.id, o.seeds).show()});
  }
  r.charts.push_back(chart);
  r.tables = {table, outcome_table("Runs", runs)};
  return r;
}

}  // namespace

extern const Study kGradBalance{
    .name = "grad-balance",
    .title = "Per-layer gradient norms during training: Pre-LN, NormFormer, Mix-LN, HybridNorm",
    .claim =
        "During training Pre-LN's early layers receive much larger gradients than its late layers; NormFormer, Mix-LN "
        "and "
        "HybridNorm balance the gradient across depth.",
    .source =
        "Shleifer et al. 2021, NormFormer (arXiv 2110.09456), §3, Fig. 2; Li et al. 2025, Mix-LN (arXiv 2412.13795); "
        "Zhuo "
        "et al. 2025, HybridNorm (arXiv 2503.04598).",
    .paper_setting =
        "NormFormer §3: causal LMs of 125M–2.7B (fairseq, 2048-token sequences, Adam, warm-up 750): fc2 gradients of "
        "early against late layers early in training. Mix-LN: LLaMA 71M–7B on C4 (71M: 12 layers, d 512, lr 1e-3, 10k "
        "steps). HybridNorm: OLMo 2 models of 550M–7B, gradient norms at steps 1 and 100 (Fig. 2).",
    .cost = "default ~9 min on 2 cores (3 seeds), --quick ~15 s",
    .large = "model.n_layers=24 train.steps=2000",
    .plan = plan,
    .arms = kClaimArms,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
