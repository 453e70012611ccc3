// Dynamic Tanh (Zhu et al. 2025, §7): replacing every norm by γ ⊙ tanh(α x) + β matches LayerNorm
// once α's initial value α₀ is right, but α₀ matters: too small or too large lags or diverges, and
// the good band narrows as models grow. Here α₀ is swept against the same model with LayerNorm.
#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// Each threshold written once: the sub-claims and the rule text read them.
constexpr double kMatchWithin = 0.1;  // A: best DyT − LayerNorm (nats), at most
constexpr double kMattersBy = 0.1;    // B: worst α₀ − best α₀ (nats), at least

struct Preset {
  int layers, steps;
  std::vector<double> alphas;
};
// The preset's depth and length as --set leaves them; α₀ from the axis model.options.dyt_alpha.
Preset preset(const StudyOptions& o) {
  const TrainPreset t = configured(o, o.quick ? TrainPreset{4, 30} : TrainPreset{6, 400});
  std::vector<double> alphas = o.number_axis("model.options.dyt_alpha");
  std::sort(alphas.begin(), alphas.end());
  return {t.layers, t.steps, alphas};
}

std::string id_of(double alpha, int seed) {
  return alpha > 0 ? fmt::format("dyt-a{:g}-s{}", alpha, seed) : fmt::format("layernorm-s{}", seed);
}

// Unit-variance embeddings (√d × N(0, d^-1/2)) are DyT's placement default: tanh(αx) only normalizes
// when x is not tiny, and with GPT-2's N(0, 0.02) embeddings DyT stalls at the unigram level whatever α₀
// (docs/studies.md, dyt-alpha). The main arms, LayerNorm's included,
// use Xavier matrices with the same embeddings (use_xavier); one run with the GPT-2 init, embeddings
// included, is kept as a contrast arm and set explicitly, since DyT's defaults no longer give it.
Json arm(const std::string& placement, const Preset& p, int seed, double alpha, bool gpt2_init) {
  Json config = small_lm(placement, p.layers, p.steps, static_cast<uint64_t>(seed), p.steps / 10);
  if (gpt2_init) {
    config["model"]["embed_scale"] = "none";
    config["model"]["init"] = {{"scheme", "gpt2"}, {"std", 0.02}, {"embed_std", 0.02}};
  } else {
    use_xavier(config);
  }
  if (alpha > 0) config["model"]["options"] = {{"dyt_alpha", alpha}};
  return config;
}

std::vector<RunRequest> plan(const StudyOptions& o) {
  const Preset p = preset(o);
  std::vector<RunRequest> runs;
  for (int seed : o.seeds) {
    runs.push_back({id_of(0, seed), arm("pre", p, seed, 0, false), "train", ""});
    for (double alpha : p.alphas) {
      if (alpha <= 0) fail("--grid model.options.dyt_alpha: α₀ must be > 0, not {:g}; nothing was run", alpha);
      runs.push_back({id_of(alpha, seed), arm("dyt", p, seed, alpha, false), "train", ""});
    }
    runs.push_back({seed_id("dyt-a0.5-gpt2-init", seed), arm("dyt", p, seed, 0.5, true), "train", ""});
  }
  return runs;
}

// The α₀ sweep: LayerNorm's loss, the best and worst α₀ by mean loss and their losses per seed, with the sweep's
// chart and table. NaN (a failed α₀) poisons both, so neither sub-claim is decided from the others.
struct Sweep {
  SeedValues ln, best, worst;
  double best_alpha = NAN, worst_alpha = NAN;
  Chart chart;
  Table table;
};
Sweep sweep_of(const StudyOptions& o, const Preset& p, const std::vector<RunOutcome>& runs) {
  // Final validation loss per seed; a diverged run counts as the unigram entropy.
  const auto val = [&](double alpha) {
    return over_seeds(o.seeds,
                      [&](int seed) -> double { return val_loss_or_unigram(find_run(runs, id_of(alpha, seed))); });
  };
  Sweep out{.ln = val(0),
            .chart = {"final validation loss against α₀, mean over seeds (flat line: LayerNorm)", "α₀", "val loss"},
            .table = {"Final validation loss (over seeds)", {"model", "val loss", "− LayerNorm (mean)"}}};
  Series dyt{"DyT", {}, {}}, reference{"LayerNorm", {}, {}};
  out.table.rows.push_back({"LayerNorm", out.ln.show(), "0"});
  double best_mean = INFINITY, worst_mean = -INFINITY;
  bool missing = false;
  for (double alpha : p.alphas) {
    const SeedValues v = val(alpha);
    const double m = v.mean();
    dyt.x.push_back(alpha), dyt.y.push_back(m);
    reference.x.push_back(alpha), reference.y.push_back(out.ln.mean());
    out.table.rows.push_back({fmt::format("DyT α₀ = {:g}", alpha), v.show(), num(m - out.ln.mean())});
    if (std::isnan(m)) missing = true;
    else {
      if (std::isnan(out.best_alpha) || m < best_mean) best_mean = m, out.best_alpha = alpha;
      if (std::isnan(out.worst_alpha) || m > worst_mean) worst_mean = m, out.worst_alpha = alpha;
    }
  }
  const SeedValues nothing = over_seeds(o.seeds, [](int) { return NAN; });
  out.best = missing || std::isnan(out.best_alpha) ? nothing : val(out.best_alpha);
  out.worst = missing || std::isnan(out.worst_alpha) ? nothing : val(out.worst_alpha);
  out.chart.series = {dyt, reference};
  return out;
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const Preset p = preset(o);
  Report r;
  r.setup = fmt::format(
      "Xavier init with unit-variance embeddings (√d × N(0, d^-1/2)); DyT in every norm slot with α₀ ∈ "
      "{{{}}} (model.options.dyt_alpha), against Pre-LN with LayerNorm; a contrast run: DyT α₀ = 0.5 with "
      "GPT-2 init.",
      fmt::join(p.alphas, ", "));
  Sweep sw = sweep_of(o, p, runs);
  const SeedValues &ln = sw.ln, &best = sw.best, &worst = sw.worst;
  const double best_alpha = sw.best_alpha, worst_alpha = sw.worst_alpha;
  Chart& sweep = sw.chart;
  Table& table = sw.table;
  const SeedValues contrast = val_losses(runs, "dyt-a0.5-gpt2-init", o.seeds);
  table.rows.push_back({"DyT α₀ = 0.5, GPT-2 init (contrast)", contrast.show(), num(contrast.mean() - ln.mean())});
  Chart curves{fmt::format("training loss (seed {})", o.seeds.front()), "step", "loss"};
  const std::string suffix = fmt::format("-s{}", o.seeds.front());
  for (const RunOutcome& run : runs)
    if (run.request.id.ends_with(suffix))
      curves.series.push_back(loss_series(run.request.id.substr(0, run.request.id.size() - suffix.size()), &run));
  r.charts = {sweep, curves};
  r.tables = {table, outcome_table("Runs", runs)};

  r.claims = {
      claim_below(
          "A", fmt::format("DyT at a well-chosen α₀ (here {:g}, the lowest mean loss) matches LayerNorm", best_alpha),
          "final validation loss, best DyT − LayerNorm (nats)", difference(best, ln), kMatchWithin),
      claim_above(
          "B", "α₀ matters",
          fmt::format("final validation loss, worst α₀ ({:g}) − best α₀ ({:g}) (nats)", worst_alpha, best_alpha),
          difference(worst, best), kMattersBy),
  };
  cannot_decide_unless(r.claims.back(), p.alphas.size() >= 2,
                       "the model.options.dyt_alpha axis has one value, B needs two");
  std::vector<int> ln_diverged;  // a diverged LayerNorm is no reference to match
  for (int seed : o.seeds)
    if (train_result(find_run(runs, id_of(0, seed))).outcome == Outcome::diverged) ln_diverged.push_back(seed);
  cannot_decide_unless(
      r.claims.front(), ln_diverged.empty(),
      fmt::format("LayerNorm diverged on seed {}: no reference to match", fmt::join(ln_diverged, ", ")));
  r.evidence.push_back(
      fmt::format("Contrast (not in the verdict): DyT α₀ = 0.5 with GPT-2's small init reaches {} (LayerNorm "
                  "with unit-variance embeddings: {})",
                  contrast.show(), ln.show()));
  r.verdict_rule = fmt::format(
      "Final validation loss per seed (a diverged run counts as the unigram entropy); the best and worst α₀ are "
      "those with the lowest and highest mean loss, then compared seed by seed. A: the best α₀'s loss is less than "
      "{:g} nats above LayerNorm's (or below); B: the worst α₀'s loss exceeds the best's by > {:g} nats.",
      kMatchWithin, kMattersBy);
  return r;
}

}  // namespace

extern const Study kDytAlpha{
    .name = "dyt-alpha",
    .title = "DyT: the initial α against LayerNorm",
    .claim =
        "With a well-chosen α₀, DyT (no normalization) matches Pre-LN with LayerNorm; α₀ matters: away from the good "
        "value "
        "training lags or diverges.",
    .source = "Zhu, Chen, He, LeCun, Liu 2025, Transformers without Normalization (CVPR 2025, arXiv 2503.10622), §7.",
    .paper_setting =
        "DyT §7: LLaMA 7B–70B language models, α₀ set per position and size (7B: 0.8 for attention norms, 0.2 for FFN "
        "and final norms); vision models (ViT, ConvNeXt) with α₀ = 0.5.",
    .cost = "default ~12 min on 2 cores (3 seeds), --quick ~15 s",
    .large = "model.n_layers=12 train.steps=2000",
    .axes = {{.key = "model.options.dyt_alpha",
              .defaults = "0.1,0.5,1,2,4",
              .quick = "0.5,2",
              .description = "DyT's initial α₀, one run each against the LayerNorm run (A: the best α₀; B: the "
                             "spread, at least two values); the GPT-2-init contrast run keeps α₀ = 0.5"}},
    .plan = plan,
    .judge = judge,
};

}  // namespace normlab::study
