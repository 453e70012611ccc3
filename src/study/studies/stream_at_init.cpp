// Xiong et al. 2020, Lemma 2: at initialization (Xavier, unit-variance inputs, d × d FFN matrices)
// the Pre-LN stream entering layer l has (1 + l/2) ≤ E‖x_l‖²/d ≤ (1 + 3l/2), while every Post-LN
// layer input is a LayerNorm output with E‖x‖²/d = 1. That Post-LN half holds by construction (γ = 1,
// β = 0 at init), so it is shown as a check, not judged. A d_ff = 4d Pre-LN model is shown beside it:
// Xavier on a non-square fc1 gives hidden variance 0.4, so the lower bound is not expected there.
#include <cmath>

#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// The lemma's inputs: no position table (RoPE), no biases, unit-variance token embeddings; d_ff set by the plan.
Json lemma_config(const StudyOptions& o, const std::string& placement, int seed) {
  Json config = small_lm(placement, o.quick ? 8 : 24, 1, static_cast<uint64_t>(seed));
  use_xavier(config);
  config["model"]["positions"] = "rope";
  config["model"]["bias"] = false;
  return config;
}
// The depth and width as --set leaves them.
int depth(const StudyOptions& o) { return configured(o, lemma_config(o, "pre", 1), "model.n_layers").get<int>(); }
int width(const StudyOptions& o) { return configured(o, lemma_config(o, "pre", 1), "model.d_model").get<int>(); }

// The arms: the lemma's (d_ff = d, Pre-LN and Post-LN), then a Pre-LN contrast arm per multiple of d.
struct Case {
  std::string id, placement;
  int ffn_multiple;
  std::string label;
};
std::vector<Case> cases(const StudyOptions& o) {
  std::vector<Case> out = {{"pre", "pre", 1, "Pre-LN, d_ff = d"}, {"post", "post", 1, "Post-LN, d_ff = d"}};
  for (int k : o.int_axis("d_ff_multiple"))
    out.push_back({fmt::format("pre-ffn{}", k), "pre", k, fmt::format("Pre-LN, d_ff = {}d", k)});
  return out;
}

std::vector<RunRequest> plan(const StudyOptions& o) {
  const int d = width(o);
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (const Case& c : cases(o)) {
      Json config = lemma_config(o, c.placement, seed);
      config["model"]["d_ff"] = d * c.ffn_multiple;  // relative to the configured d_model
      runs.push_back({seed_id(c.id, seed), config, "probe", "stream-init"});
    }
  return runs;
}

// E‖x_l‖²/d for l = 0..L of one seed (NaN where missing).
std::vector<double> seed_profile(const std::vector<RunOutcome>& runs, const std::string& id, int layers, int seed) {
  std::vector<double> v = analysis_column(find_run(runs, seed_id(id, seed)), "stream-init", "mean_square");
  v.resize(static_cast<size_t>(layers + 1), NAN);
  return v;
}

// The same averaged over seeds, for the chart and the table.
std::vector<double> profile(const std::vector<RunOutcome>& runs, const std::string& id, int layers,
                            const std::vector<int>& seeds) {
  return seed_mean_each(seeds, static_cast<size_t>(layers + 1),
                        [&](int seed) { return seed_profile(runs, id, layers, seed); });
}

// ---- The pre-registration ------------------------------------------------------------------------------------------
// The lemma's band and its linear growth, both read from the stream-init analysis's E‖x_l‖²/d of the Pre-LN arm with
// d_ff = d: A, the least inside layer's margin to [1 + l/2, 1 + 3l/2]; B, the least-squares slope against l.

Json variables(const StudyOptions& o) { return {{"L", depth(o)}}; }

const std::vector<ArmSpec> kClaimArms = {{"pre", "Pre-LN (d_ff = d)"}, {"post", "Post-LN (d_ff = d)"}};

// The lemma's band: (1 + l/2) ≤ E‖x_l‖²/d ≤ (1 + 3l/2). Its per-layer growths also bound B's slope.
struct Band {
  double from, low_per_layer, high_per_layer;
  double lower(int l) const { return from + low_per_layer * l; }
  double upper(int l) const { return from + high_per_layer * l; }
};
constexpr Band kLemma{1, 0.5, 1.5};

const Json kStreamInit = {{"analysis", "stream-init"}, {"column", "mean_square"}};
Json lemma_band() {
  Json band = kStreamInit;
  band.update(
      {{"from", kLemma.from}, {"low_per_layer", kLemma.low_per_layer}, {"high_per_layer", kLemma.high_per_layer}});
  return band;
}

constexpr const char* kWhere = "Xiong et al. 2020, §3.3, Lemma 2";

const std::vector<ClaimSpec> kSubClaims = {
    {.id = "A",
     .statement = "Pre-LN's E‖x_l‖²/d lies inside [1 + l/2, 1 + 3l/2] at every layer l = 1..{L} (d_ff = d)",
     .quote = "\"For the Pre-LN Transformer, (1 + l/2)d ≤ E(‖x^pre_{l,i}‖²₂) ≤ (1 + 3l/2)d for all l > 0 and i. "
              "Expectations are taken over the input and the randomness of initialization.\"",
     .where = kWhere,
     .of = {"pre", "band_margin", lemma_band()},
     .threshold = 0},
    {.id = "B",
     .statement = "Pre-LN's E‖x_l‖²/d grows linearly with l (d_ff = d)",
     .quote = "\"As we can see from Lemma 2, the scale of the hidden states in the Post-LN Transformer keeps to be the "
              "same in expectation while the scale of the hidden states in the Pre-LN Transformer grows linearly along "
              "with the depth.\"",
     .where = kWhere,
     .of = {"pre", "profile_slope", kStreamInit},
     .side = SubClaim::Side::within,
     .threshold = {kLemma.low_per_layer, kLemma.high_per_layer}},
};

using Contrasts = std::vector<std::pair<Case, std::vector<double>>>;

// The chart and table of every profile against the lemma's bounds; returns how many of Post-LN's layer inputs have a
// mean square within 1 ± 0.05 (the check).
int add_profiles(Report& r, int L, const std::vector<double>& pre, const std::vector<double>& post,
                 const Contrasts& contrasts) {
  Chart chart{"E‖x_l‖²/d entering layer l at init (mean over seeds)", "layer l", "E‖x‖²/d"};
  Series lower{"lemma lower bound 1 + l/2", {}, {}}, upper{"lemma upper bound 1 + 3l/2", {}, {}};
  Table table{"E‖x_l‖²/d at init (mean over seeds)", {"l", "1 + l/2", "Pre-LN (d_ff = d)", "1 + 3l/2", "Post-LN"}};
  for (const auto& [c, p] : contrasts) table.header.push_back(c.label);
  int post_unit = 0;
  for (int l = 0; l <= L; ++l) {
    const size_t i = static_cast<size_t>(l);
    lower.x.push_back(l), lower.y.push_back(kLemma.lower(l));
    upper.x.push_back(l), upper.y.push_back(kLemma.upper(l));
    if (l >= 1) post_unit += std::abs(post[i] - 1.0) <= 0.05;
    table.rows.push_back({std::to_string(l), num(kLemma.lower(l)), num(pre[i]), num(kLemma.upper(l)), num(post[i])});
    for (const auto& [c, p] : contrasts) table.rows.back().push_back(num(p[i]));
  }
  chart.series = {lower, upper, indexed_series("Pre-LN, d_ff = d", pre), indexed_series("Post-LN", post)};
  for (const auto& [c, p] : contrasts) chart.series.push_back(indexed_series(c.label, p));
  r.charts.push_back(chart);
  r.tables.push_back(table);
  return post_unit;
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const int L = depth(o);
  Report r;
  r.setup =
      "normlab probe --analysis stream-init on each config (mean of 3 inits × 4 batches per run); d_ff = d (the "
      "lemma's assumption, d = model.d_model) and multiples of d for contrast, RoPE (no position table), no biases, "
      "Xavier init, unit-variance embeddings.";
  const auto pre = profile(runs, "pre", L, o.seeds), post = profile(runs, "post", L, o.seeds);
  Contrasts contrasts;
  for (const Case& c : cases(o))
    if (c.id != "pre" && c.id != "post") contrasts.emplace_back(c, profile(runs, c.id, L, o.seeds));

  const int post_unit = add_profiles(r, L, pre, post, contrasts);

  const SeedValues top = over_seeds(o.seeds, [&](int seed) { return seed_profile(runs, "pre", L, seed).back(); });
  r.evidence = {
      fmt::format("Pre-LN (d_ff = d): E‖x_{}‖²/d = {} (lemma: between {} and {})", L, top.show(), num(kLemma.lower(L)),
                  num(kLemma.upper(L))),
      fmt::format("Check (not in the verdict: a LayerNorm output by construction): Post-LN, {} of {} layer inputs with "
                  "E‖x‖²/d (mean over seeds) within 1 ± 0.05",
                  post_unit, L),
  };
  for (const auto& contrast : contrasts) {
    // Named members, not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const Case& c = contrast.first;
    const std::vector<double>& p = contrast.second;
    r.evidence.push_back(fmt::format(
        "Contrast (not in the verdict): Pre-LN with d_ff = {}d grows {} per layer, to {} at l = {}", c.ffn_multiple,
        measure_term({c.id, "profile_slope", kStreamInit}, variables(o), runs, o.seeds).show(),
        num(p[static_cast<size_t>(L)]), L));
  }
  r.verdict_rule =
      "Post-LN's layer inputs are LayerNorm outputs (mean square 1 by construction): shown as a check. The wider "
      "Pre-LN models are not part of the lemma and are shown for contrast.";
  return r;
}

}  // namespace

extern const Study kStreamAtInit{
    .name = "stream-at-init",
    .title = "Residual-stream mean square by layer at initialization (Xiong's Lemma 2)",
    .claim =
        "At init, Pre-LN's stream grows linearly with depth, (1 + l/2) ≤ E‖x_l‖²/d ≤ (1 + 3l/2), while every Post-LN "
        "layer input has E‖x‖²/d = 1.",
    .source = "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture (arXiv 2002.04745), Lemma 2.",
    .paper_setting =
        "Xiong et al. Lemma 2: at init, with Xavier weights, d_ff = d and unit-variance inputs, (1 + l/2)·d ≤ E‖x_l‖² "
        "≤ (1 + 3l/2)·d for Pre-LN, and (3/2)·d before each Post-LN norm (a statement about expectations, for any "
        "depth).",
    .cost = "default ~10 s on 2 cores (5 seeds), --quick ~5 s",
    .large = "model.n_layers=48",
    .large_size = LargeSize::without_ffn,
    .axes = {{.key = "d_ff_multiple",
              .defaults = "4",
              .quick = "4",
              .description = "d_ff of the Pre-LN contrast arms (run pre-ffn<k>), as multiples k of the configured "
                             "model.d_model; the lemma's arms always use d_ff = d",
              .sets = "model.d_ff"}},
    .plan = plan,
    .arms = kClaimArms,
    .variables = variables,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
