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

// The arm of an α₀ (0: LayerNorm), and its run for a seed.
std::string arm_id(double alpha) { return alpha > 0 ? fmt::format("dyt-a{:g}", alpha) : "layernorm"; }
std::string id_of(double alpha, int seed) { return seed_id(arm_id(alpha), seed); }

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

// ---- The pre-registration ------------------------------------------------------------------------------------------
// The best and worst α₀ are chosen once, by their mean final validation loss over the seeds (a sweep's pick), then
// compared with LayerNorm (A) or with each other (B) seed by seed. A diverged run counts as the unigram entropy.

Json variables(const StudyOptions& o) {
  const Preset p = preset(o);
  return {{"alpha", p.alphas}, {"two_alphas", p.alphas.size() >= 2}};
}

const std::vector<ArmSpec> kArms = {
    {"layernorm", "LayerNorm"},
    {"dyt-a{alpha}", "DyT at α₀ {alpha}"},
};

Term val_loss(std::string arm, Extreme extreme = Extreme::none) {
  return {std::move(arm), "final_val_loss", Json::object(), extreme};
}

const std::vector<ClaimSpec> kSubClaims = {
    {.id = "A",
     .statement = "DyT at a well-chosen α₀ (the lowest mean loss) matches LayerNorm",
     .quote = "By incorporating DyT, Transformers without normalization can match or exceed the performance of their "
              "normalized counterparts, mostly without hyperparameter tuning.",
     .where = "Zhu et al. 2025, abstract; the LLaMA loss table",
     .of = val_loss("dyt-a{alpha}", Extreme::lowest_mean),
     .against = val_loss("layernorm"),
     .compare = Compare::difference,
     .side = SubClaim::Side::below,
     .threshold = 0.1,
     .runs_must = {{"layernorm", RunMust::not_diverge}}},
    {.id = "B",
     .statement = "α₀ matters",
     .where = "Zhu et al. 2025, §7: α₀ is set per position and model size for LLMs (a paraphrase; docs/studies.md)",
     .of = val_loss("dyt-a{alpha}", Extreme::highest_mean),
     .against = val_loss("dyt-a{alpha}", Extreme::lowest_mean),
     .compare = Compare::difference,
     .threshold = 0.1,
     .needs = {{"two_alphas", "the model.options.dyt_alpha axis has one value, B needs two"}}},
};

// The sweep's chart and table: each α₀'s final validation loss over the seeds, against LayerNorm's.
void sweep(const StudyOptions& o, const Preset& p, const std::vector<RunOutcome>& runs, Report& r) {
  const SeedValues ln = measure_term(val_loss("layernorm"), Json::object(), runs, o.seeds);
  Chart chart{"final validation loss against α₀, mean over seeds (flat line: LayerNorm)", "α₀", "val loss"};
  Table table{"Final validation loss (over seeds)", {"model", "val loss", "− LayerNorm (mean)"}};
  Series dyt{"DyT", {}, {}}, reference{"LayerNorm", {}, {}};
  table.rows.push_back({"LayerNorm", ln.show(), "0"});
  for (double alpha : p.alphas) {
    const SeedValues v = measure_term(val_loss(arm_id(alpha)), Json::object(), runs, o.seeds);
    dyt.x.push_back(alpha), dyt.y.push_back(v.mean());
    reference.x.push_back(alpha), reference.y.push_back(ln.mean());
    table.rows.push_back({fmt::format("DyT α₀ = {:g}", alpha), v.show(), num(v.mean() - ln.mean())});
  }
  const SeedValues contrast = val_losses(runs, "dyt-a0.5-gpt2-init", o.seeds);
  table.rows.push_back({"DyT α₀ = 0.5, GPT-2 init (contrast)", contrast.show(), num(contrast.mean() - ln.mean())});
  chart.series = {dyt, reference};
  r.charts.push_back(chart);
  r.tables.push_back(table);
  r.evidence.push_back(
      fmt::format("Contrast (not in the verdict): DyT α₀ = 0.5 with GPT-2's small init reaches {} (LayerNorm "
                  "with unit-variance embeddings: {})",
                  contrast.show(), ln.show()));
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const Preset p = preset(o);
  Report r;
  r.setup = fmt::format(
      "Xavier init with unit-variance embeddings (√d × N(0, d^-1/2)); DyT in every norm slot with α₀ ∈ "
      "{{{}}} (model.options.dyt_alpha), against Pre-LN with LayerNorm; a contrast run: DyT α₀ = 0.5 with "
      "GPT-2 init.",
      fmt::join(p.alphas, ", "));
  sweep(o, p, runs, r);
  Chart curves{fmt::format("training loss (seed {})", o.seeds.front()), "step", "loss"};
  const std::string suffix = fmt::format("-s{}", o.seeds.front());
  for (const RunOutcome& run : runs)
    if (run.request.id.ends_with(suffix))
      curves.series.push_back(loss_series(run.request.id.substr(0, run.request.id.size() - suffix.size()), &run));
  r.charts.push_back(curves);
  r.tables.push_back(outcome_table("Runs", runs));
  const Json v = variables(o);
  const std::string best = chosen_arm(val_loss("dyt-a{alpha}", Extreme::lowest_mean), v, runs, o.seeds),
                    worst = chosen_arm(val_loss("dyt-a{alpha}", Extreme::highest_mean), v, runs, o.seeds);
  r.evidence.insert(r.evidence.begin(), fmt::format("By mean final validation loss over the seeds: best {}, worst {}",
                                                    best.empty() ? "undecided (an α₀ lacks its numbers)" : best,
                                                    worst.empty() ? "undecided" : worst));
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
    .arms = kArms,
    .variables = variables,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
