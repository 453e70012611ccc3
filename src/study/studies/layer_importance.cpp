// After training, how much does each layer matter? Two measures: the angular distance between the
// stream entering layer ℓ and leaving it (Gromov et al. 2024), and the validation-loss increase when
// layer ℓ is skipped. The Curse of Depth (Sun et al. 2025, Figs. 3 and 7) and Mix-LN (Li et al. 2025)
// report that deep Pre-LN layers barely turn the stream and are cheap to drop, that in Post-LN the
// early layers are the cheap ones, and that LayerNorm Scaling spreads the work more evenly.
#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// The preset as --set leaves it (model.n_layers, train.steps; the probe interval scales with the steps).
TrainPreset preset(const StudyOptions& o) { return configured(o, o.quick ? TrainPreset{4, 30} : TrainPreset{12, 500}); }

constexpr Arm kArms[] = {{"pre", "Pre-LN"}, {"post", "Post-LN"}, {"lns", "LayerNorm Scaling"}};

// Warm-up lasts half the run for every arm: with a 10% warm-up 12-layer Post-LN at lr 1e-3 stalls at the unigram
// level (docs/studies.md, layer-importance), and an untrained model's layers say nothing.
std::vector<RunRequest> plan(const StudyOptions& o) {
  const TrainPreset p = preset(o);
  return placement_runs(o.seeds, kArms, p, p.steps / 2, "angular,layer-drop");
}

// Per layer, seeds averaged: an analysis column (angular_distance or delta_loss).
std::vector<double> per_layer(const std::vector<RunOutcome>& runs, const std::string& placement,
                              const std::string& analysis, const std::string& column, int layers,
                              const std::vector<int>& seeds) {
  return seed_mean_each(seeds, static_cast<size_t>(layers), [&](int seed) {
    return analysis_column(find_run(runs, seed_id(placement, seed)), analysis, column);
  });
}

// ---- The pre-registration ------------------------------------------------------------------------------------------
// Layers split into the first and second half of the stack, an analysis's column averaged over the layers of each
// half, per seed. A claim about a trained model is decided only if the model trained on every seed.

Term half(std::string arm, const char* analysis, const char* column, const char* part) {
  return {std::move(arm), "analysis_halves", {{"analysis", analysis}, {"column", column}, {"part", part}}};
}
Term angular(std::string arm, const char* part) { return half(std::move(arm), "angular", "angular_distance", part); }
Term drop(std::string arm, const char* part) { return half(std::move(arm), "layer-drop", "delta_loss", part); }

const std::vector<ArmSpec> kClaimArms = {{"pre", "Pre-LN"}, {"post", "Post-LN"}, {"lns", "LayerNorm Scaling"}};

const std::vector<ClaimSpec> kSubClaims = {
    {.id = "A",
     .statement = "In trained Pre-LN the deep layers turn the stream less",
     .quote = "Conversely, Pre-LN LLaMa-130M demonstrates a gradual decrease in angular distance with depth, resulting "
              "in highly similar deep layers (Figure 3-b).",
     .where = "Sun et al. 2025, The Curse of Depth, §2.2, Fig. 3(b)",
     .of = angular("pre", "second_half"),
     .against = angular("pre", "first_half"),
     .compare = Compare::difference,
     .side = SubClaim::Side::below,
     .threshold = 0.0,
     .runs_must = {{"pre", RunMust::train}}},
    {.id = "B",
     .statement = "In trained Pre-LN the deep layers are cheaper to drop",
     .quote = "Removing most layers after the first in Pre-LN causes negligible performance loss (Figure 3-d), "
              "indicating their limited contribution.",
     .where = "Sun et al. 2025, The Curse of Depth, §2.2, Fig. 3(d)",
     .of = drop("pre", "second_half"),
     .against = drop("pre", "first_half"),
     .compare = Compare::difference,
     .side = SubClaim::Side::below,
     .threshold = 0.0,
     .runs_must = {{"pre", RunMust::train}}},
    {.id = "C",
     .statement = "In trained Post-LN the early layers are the cheap ones",
     .quote = "In Post-LN models, early layers exhibit high similarity (low angular distance, Figure 3-a) and their "
              "removal causes minimal performance loss (Figure 3-c), while deeper layers become more distinct and "
              "critical.",
     .where = "Sun et al. 2025, The Curse of Depth, §2.2, Fig. 3(a, c)",
     .of = drop("post", "first_half"),
     .against = drop("post", "second_half"),
     .compare = Compare::difference,
     .side = SubClaim::Side::below,
     .threshold = 0.0,
     .runs_must = {{"post", RunMust::train}}},
    {.id = "D",
     .statement = "LayerNorm Scaling makes the deep layers matter more than in Pre-LN",
     .quote =
         "Compared to Pre-LN, the performance degradation in LayerNorm Scaling is more uniformly distributed across "
         "layers, indicating a more balanced contribution from each layer.",
     .where = "Sun et al. 2025, The Curse of Depth, §5.5, Fig. 7 (left)",
     .of = drop("lns", "second_half_share"),
     .against = drop("pre", "second_half_share"),
     .compare = Compare::difference,
     .threshold = 0.0,
     .runs_must = {{"pre", RunMust::train}, {"lns", RunMust::train}}},
};

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const TrainPreset p = preset(o);
  Report r;
  r.setup =
      "After training, normlab probe --analysis angular,layer-drop on the final checkpoint (4 validation batches).";
  Chart angular_chart{"angular distance between the stream entering and leaving layer ℓ (mean over seeds)", "layer ℓ",
                      "arccos(cos)/π"};
  Chart drop_chart{"validation-loss increase when layer ℓ is skipped (mean over seeds)", "layer ℓ", "Δloss (nats)"};
  Table table{"Halves of the stack (means over layers, then over seeds)",
              {"placement", "angular, first half", "angular, second half", "Δloss, first half", "Δloss, second half",
               "second-half share of Δloss"}};
  for (const Arm& a : kArms) {
    angular_chart.series.push_back(
        indexed_series(a.label, per_layer(runs, a.id, "angular", "angular_distance", p.layers, o.seeds)));
    drop_chart.series.push_back(
        indexed_series(a.label, per_layer(runs, a.id, "layer-drop", "delta_loss", p.layers, o.seeds)));
    const auto value = [&](const Term& t) { return measure_term(t, Json::object(), runs, o.seeds).show(); };
    table.rows.push_back({a.label, value(angular(a.id, "first_half")), value(angular(a.id, "second_half")),
                          value(drop(a.id, "first_half")), value(drop(a.id, "second_half")),
                          value(drop(a.id, "second_half_share"))});
  }
  r.charts = {angular_chart, drop_chart};
  r.tables = {table, outcome_table("Training runs", runs)};
  return r;
}

}  // namespace

extern const Study kLayerImportance{
    .name = "layer-importance",
    .title = "Which layers matter after training: angular distance and layer-drop Δloss",
    .claim =
        "In a trained Pre-LN model the deep layers barely turn the stream and are cheap to drop; in Post-LN the early "
        "layers are the cheap ones; LayerNorm Scaling makes the deep layers matter more than in Pre-LN.",
    .source =
        "Sun et al. 2025, The Curse of Depth (arXiv 2502.05795), Figs. 3, 7; Li et al. 2025, Mix-LN (arXiv "
        "2412.13795), "
        "Fig. 1; Gromov et al. 2024 (angular distance).",
    .paper_setting =
        "Curse of Depth Figs. 3 and 7: an in-house LLaMA-130M (12 layers, d 768) trained on C4 (10k steps, lr 1e-3): "
        "angular distance between adjacent layers and the drop in ARC-e accuracy from removing one layer (not a "
        "loss), for Pre-LN, Post-LN and Pre-LN + LNS.",
    .cost = "default ~10 min on 2 cores (3 seeds), --quick ~15 s",
    .large = "model.n_layers=24 train.steps=2000",
    .plan = plan,
    .arms = kClaimArms,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
