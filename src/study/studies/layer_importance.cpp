// After training, how much does each layer matter? Two measures: the angular distance between the
// stream entering layer ℓ and leaving it (Gromov et al. 2024), and the validation-loss increase when
// layer ℓ is skipped. The Curse of Depth (Sun et al. 2025, Figs. 3 and 7) and Mix-LN (Li et al. 2025)
// report that deep Pre-LN layers barely turn the stream and are cheap to drop, that in Post-LN the
// early layers are the cheap ones, and that LayerNorm Scaling spreads the work more evenly.
#include <cmath>
#include <map>

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

// The mean over the first half of the layers and over the second.
std::pair<double, double> halves(const std::vector<double>& v) {
  const size_t h = v.size() / 2;
  return {mean({v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h)}),
          mean({v.begin() + static_cast<std::ptrdiff_t>(h), v.end()})};
}

// One arm's halves, per seed (NaN where a seed's column is missing or short).
struct Halves {
  SeedValues first, second;
  SeedValues share() const {  // the second half's share of the sum
    return paired(first, second, [](double a, double b) { return b / (a + b); });
  }
};
Halves seed_halves(const std::vector<RunOutcome>& runs, const std::string& placement, const std::string& analysis,
                   const std::string& column, int layers, const std::vector<int>& seeds) {
  const auto half = [&](bool second) {
    return over_seeds(seeds, [&](int seed) {
      std::vector<double> v = analysis_column(find_run(runs, seed_id(placement, seed)), analysis, column);
      v.resize(static_cast<size_t>(layers), NAN);
      const auto h = halves(v);
      return second ? h.second : h.first;
    });
  };
  return {half(false), half(true)};
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const TrainPreset p = preset(o);
  Report r;
  r.setup =
      "After training, normlab probe --analysis angular,layer-drop on the final checkpoint (4 validation batches).";
  Chart angular{"angular distance between the stream entering and leaving layer ℓ (mean over seeds)", "layer ℓ",
                "arccos(cos)/π"};
  Chart drop{"validation-loss increase when layer ℓ is skipped (mean over seeds)", "layer ℓ", "Δloss (nats)"};
  Table table{"Halves of the stack (means over layers, then over seeds)",
              {"placement", "angular, first half", "angular, second half", "Δloss, first half", "Δloss, second half",
               "second-half share of Δloss"}};
  struct Arm2 {
    Halves angle, loss;
  };
  std::map<std::string, Arm2> h;  // by arm id
  for (const Arm& a : kArms) {
    const auto ang = per_layer(runs, a.id, "angular", "angular_distance", p.layers, o.seeds);
    const auto dl = per_layer(runs, a.id, "layer-drop", "delta_loss", p.layers, o.seeds);
    angular.series.push_back(indexed_series(a.label, ang));
    drop.series.push_back(indexed_series(a.label, dl));
    const Arm2& arm = h[a.id] = {seed_halves(runs, a.id, "angular", "angular_distance", p.layers, o.seeds),
                                 seed_halves(runs, a.id, "layer-drop", "delta_loss", p.layers, o.seeds)};
    table.rows.push_back({a.label, arm.angle.first.show(), arm.angle.second.show(), arm.loss.first.show(),
                          arm.loss.second.show(), arm.loss.share().show()});
  }
  r.charts = {angular, drop};
  r.tables = {table, outcome_table("Training runs", runs)};

  const Arm2 &pre = h["pre"], &post = h["post"], &lns = h["lns"];
  r.claims = {
      claim_below("A", "In trained Pre-LN the deep layers turn the stream less",
                  "Pre-LN mean angular distance, second half − first half of the stack",
                  difference(pre.angle.second, pre.angle.first), 0.0),
      claim_below("B", "In trained Pre-LN the deep layers are cheaper to drop",
                  "Pre-LN mean layer-drop Δloss, second half − first half (nats)",
                  difference(pre.loss.second, pre.loss.first), 0.0),
      claim_below("C", "In trained Post-LN the early layers are the cheap ones",
                  "Post-LN mean layer-drop Δloss, first half − second half (nats)",
                  difference(post.loss.first, post.loss.second), 0.0),
      claim_above("D", "LayerNorm Scaling makes the deep layers matter more than in Pre-LN",
                  "second half's share of the summed layer-drop Δloss, LNS − Pre-LN",
                  difference(lns.loss.share(), pre.loss.share()), 0.0),
  };
  // A claim about a trained model says nothing when the model stalled: its layers are not a trained one's.
  const auto trained = [&](SubClaim& c, std::initializer_list<const char*> arms) {
    for (const char* arm : arms)
      cannot_decide_unless(c, all_trained(runs, arm, o.seeds) != Truth::fails,
                           fmt::format("{} did not train on every seed", arm));
  };
  trained(r.claims[0], {"pre"}), trained(r.claims[1], {"pre"}), trained(r.claims[2], {"post"});
  trained(r.claims[3], {"pre", "lns"});
  r.verdict_rule =
      "Layers split into the first and second half of the stack, values averaged over the layers of each half, per "
      "seed; differences paired by seed. A: Pre-LN's mean angular distance is lower in the second half; B: Pre-LN's "
      "mean layer-drop Δloss is lower in the second half; C: Post-LN's is lower in the first half; D: the second "
      "half's share of the summed Δloss is larger for LayerNorm Scaling than for Pre-LN. A sub-claim about a model "
      "is decided only if that model trained on every seed (a stalled model's layers say nothing about a trained "
      "one's).";
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
    .judge = judge,
};

}  // namespace normlab::study
