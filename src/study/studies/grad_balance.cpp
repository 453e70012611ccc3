// Gradient balance across depth during training. NormFormer (Shleifer et al. 2021, §3, Fig. 2):
// Pre-LN's early layers get much larger gradients than its late layers, and NormFormer's extra norms
// and scales even them out. Mix-LN (Li et al. 2025) puts Post-LN in the first layers for the same
// reason; HybridNorm (Zhuo et al. 2025: QKV-norm in attention, Post-LN FFN) claims the same balance.
#include <cmath>
#include <cstdio>
#include <map>

#include "probe/records.h"
#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// Each threshold written once: the sub-claims and the rule text read them.
constexpr double kPreLnImbalance = 1.5;  // A: Pre-LN's first-layer ÷ last-layer gradient, at least
constexpr double kBalancedBy = 0.0;      // B-D: a placement's imbalance − Pre-LN's, at most

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

// Per layer: ‖∂L/∂W_fc2‖, the gradient of the FFN's second weight (NormFormer's statistic, §3 Fig. 3), averaged over
// the probes of the first quarter of training ("early in training"), up to step `last_step` (NaN for a layer without
// it in some record, and for every layer of a run without records).
std::vector<double> layer_grads(const RunOutcome* run, int layers, int last_step) {
  const size_t n = static_cast<size_t>(layers);
  auto records = run ? probe_records(run->dir / "run", probe::family::param) : std::vector<Json>{};
  std::erase_if(records, [&](const Json& j) { return number(j, probe::field::step) > last_step; });
  if (records.empty()) return std::vector<double>(n, NAN);
  std::vector<double> sum(n, 0.0);
  const std::string pattern = fmt::format("{}layers.%d.ffn.fc2.weight%n", layer_prefix(run));
  for (Json& j : records) {
    std::vector<double> norm(n, NAN);
    const std::vector<double> norms = numbers(j, probe::field::grad_norm);
    for (size_t i = 0; i < norms.size(); ++i) {
      int layer = -1, length = 0;
      const std::string name = j["name"][i].is_string() ? j["name"][i].get<std::string>() : "";
      if (std::sscanf(name.c_str(), pattern.c_str(), &layer, &length) == 1 && length == int(name.size()) &&
          layer >= 0 && layer < layers)
        norm[static_cast<size_t>(layer)] = norms[i];
    }
    for (size_t l = 0; l < n; ++l) sum[l] += norm[l] / static_cast<double>(records.size());
  }
  return sum;
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const TrainPreset p = preset(o);
  Report r;
  r.setup =
      "Each placement's default init; the gradient norm of each layer's FFN fc2 weight, averaged over the probes "
      "(every train.probe_every steps) of the first quarter of training.";
  Chart chart{"fc2 gradient norm per layer, early in training (one seed)", "layer", "‖∂L/∂W_fc2‖"};
  chart.log_y = true;
  Table table{"Balance (over seeds)",
              {"placement", "first layer", "last layer", "first ÷ last", "|ln(first ÷ last)|", "val loss"}};
  std::map<std::string, SeedValues> ratios, imbalance;  // by arm id, per seed
  for (const Arm& a : kArms) {
    std::map<int, std::vector<double>> g;  // by seed
    for (int seed : o.seeds) g[seed] = layer_grads(find_run(runs, seed_id(a.id, seed)), p.layers, p.steps / 4);
    chart.series.push_back(indexed_series(fmt::format("{} (seed {})", a.label, o.seeds.front()), g[o.seeds.front()]));
    const SeedValues first = over_seeds(o.seeds, [&](int seed) { return g[seed].front(); }),
                     last = over_seeds(o.seeds, [&](int seed) { return g[seed].back(); });
    ratios[a.id] = ratio(first, last);
    imbalance[a.id] = each(ratios[a.id], [](double x) { return std::abs(std::log(x)); });
    table.rows.push_back({a.label, first.show(), last.show(), ratios[a.id].show(), imbalance[a.id].show(),
                          val_losses(runs, a.id, o.seeds).show()});
  }
  r.charts.push_back(chart);
  r.tables = {table, outcome_table("Runs", runs)};

  r.claims.push_back(claim_above("A", "Pre-LN's early layers receive much larger gradients than its late layers",
                                 "Pre-LN first-layer ÷ last-layer fc2 gradient norm, early in training", ratios["pre"],
                                 kPreLnImbalance));
  char letter = 'B';
  for (const Arm& arm : kArms) {
    if (arm.id == std::string("pre")) continue;
    r.claims.push_back(claim_below(std::string(1, letter++),
                                   fmt::format("{} balances the gradient across depth", arm.label),
                                   fmt::format("|ln(first ÷ last layer fc2 gradient)|, {} − Pre-LN", arm.label),
                                   difference(imbalance[arm.id], imbalance["pre"]), kBalancedBy));
  }
  r.verdict_rule = fmt::format(
      "Per layer, the norm of the FFN fc2 weight's gradient, averaged over the probes of the first quarter of "
      "training; ratios per seed. A: "
      "Pre-LN's first-layer gradient > {:g}× its last layer's; B, C, D: NormFormer's, Mix-LN's and HybridNorm's "
      "imbalance |ln(first ÷ last)| is below Pre-LN's (difference per seed < {:g}).",
      kPreLnImbalance, kBalancedBy);
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
    .judge = judge,
};

}  // namespace normlab::study
