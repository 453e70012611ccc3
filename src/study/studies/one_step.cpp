// Liu et al. 2020 (Admin) Thm 2: when every residual branch's output changes independently by at most C, the
// output change Var[F(x,W) − F(x,W*)] ≈ Σ_i β²_{N,i}·C grows like O(N) with the number of sub-layers N in Post-LN
// (the amplification that destabilizes it) but only like O(log N) in Pre-LN and in Admin, whose ω is set from
// depth. Judged on that perturbation (the branch-noise analysis); one Adam step from the init, which moves every
// branch the same way, is shown beside it.
#include <algorithm>
#include <cmath>
#include <map>

#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// Each threshold written once: the sub-claims and the rule text read them.
constexpr double kFasterBy = 0.5;                                // A, B: Post-LN's slope − the other's, at least
constexpr double kLinear = 1.0;                                  // C1, C2: the slope of sub-linear growth, at most
constexpr double kAboutLinearLow = 0.5, kAboutLinearHigh = 1.5;  // D: Post-LN's slope, within

constexpr const char* kPlacements[] = {"post", "pre", "admin"};
// A small step keeps the change in its linear regime: at lr 1e-3 the deepest Post-LN models saturate
// (docs/studies.md, one-step), hiding the growth rate.
constexpr double kLr = 1e-5;

std::string id_of(const std::string& placement, int layers, int seed) {
  return fmt::format("{}-L{}-s{}", placement, layers, seed);
}

std::vector<RunRequest> plan(const StudyOptions& o) {
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (const char* placement : kPlacements)
      for (int layers : depths(o)) {
        Json config = small_lm(placement, layers, 1, static_cast<uint64_t>(seed));
        use_xavier(config);
        runs.push_back({id_of(placement, layers, seed),
                        config,
                        "probe",
                        "one-step,branch-noise",
                        {"--lr", fmt::format("{:g}", kLr)}});
      }
  return runs;
}

// One number of an analysis per depth, for one seed: the Adam step's ‖ΔF‖² (one-step's output_change_rms², the
// mean square over logits) or Theorem 2's Var[ΔF] (branch-noise's output_change_var).
struct Measure {
  const char* analysis;
  const char* column;
  bool squared;  // the column is an RMS: its square is the variance
};
constexpr Measure kAdamStep{"one-step", "output_change_rms", true};
constexpr Measure kBranchNoise{"branch-noise", "output_change_var", false};

std::vector<double> by_depth(const std::vector<RunOutcome>& runs, const Measure& what, const std::string& placement,
                             const StudyOptions& o, int seed) {
  std::vector<double> out;
  for (int layers : depths(o)) {
    const double v = number(run_analysis(find_run(runs, id_of(placement, layers, seed)), what.analysis), what.column);
    out.push_back(what.squared ? v * v : v);
  }
  return out;
}

// The least-squares slope of log y against log x: 1 for linear growth, near 0 for logarithmic.
double log_log_slope(const std::vector<double>& x, const std::vector<double>& y) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double lx = std::log(x[i]), ly = std::log(y[i]);
    sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

// Each placement's log-log slope of `what` against N, per seed, and its chart series and table row (means over seeds).
std::map<std::string, SeedValues> slopes_of(const StudyOptions& o, const std::vector<RunOutcome>& runs,
                                            const Measure& what, Chart& chart, Table& table) {
  const std::vector<int> ds = depths(o);
  std::vector<double> sublayers;
  for (int l : ds) sublayers.push_back(2.0 * l);
  table.header = {"placement"};
  for (int l : ds) table.header.push_back(fmt::format("N = {}", 2 * l));
  table.header.push_back("log-log slope (per seed: mean ± sd)");
  std::map<std::string, SeedValues> slopes;
  for (const char* placement : kPlacements) {
    const auto each = [&](int seed) { return by_depth(runs, what, placement, o, seed); };
    const auto mean = seed_mean_each(o.seeds, ds.size(), each);
    slopes[placement] = over_seeds(o.seeds, [&](int seed) { return log_log_slope(sublayers, each(seed)); });
    chart.series.push_back({placement, sublayers, mean});
    std::vector<std::string> row = {placement};
    for (double c : mean) row.push_back(num(c));
    row.push_back(slopes[placement].show());
    table.rows.push_back(row);
  }
  return slopes;
}

// The paper's words (its abstract, verbatim) and Theorem 2 (paraphrased: its text was not at hand); the sub-claims
// quote them.
constexpr const char* kQuote =
    "\"heavy dependency on its residual branch makes training unstable, since it amplifies small parameter "
    "perturbations (e.g., parameter updates) and results in significant disturbances in the model output\" "
    "(abstract); Theorem 2 (paraphrase): Var[F(x0,W) − F(x0,W*)] ≈ Σ_i β²_{N,i}·C when each branch's change is "
    "bounded by C, O(log N) for Pre-LN and O(N) for Post-LN";
constexpr const char* kWhere = "Liu et al. 2020 (Admin), §4, Theorem 2";

std::vector<SubClaim> sub_claims(std::map<std::string, SeedValues>& slopes) {
  const SeedValues post = slopes["post"], pre = slopes["pre"], admin = slopes["admin"];
  const std::string slope = "least-squares slope of log Var[ΔF] against log N, independent branch noise";
  std::vector<SubClaim> claims = {
      claim_above("A", "Post-LN's output change grows faster with depth than Pre-LN's", slope + ", Post-LN − Pre-LN",
                  difference(post, pre), kFasterBy),
      claim_above("B", "Admin damps Post-LN's growth", slope + ", Post-LN − Admin", difference(post, admin), kFasterBy),
      claim_below("C1", "Pre-LN's output change grows less than linearly in N (the theorem: O(log N))",
                  slope + ", Pre-LN", pre, kLinear),
      claim_below("C2", "Admin's output change grows less than linearly in N (the theorem: O(log N))",
                  slope + ", Admin", admin, kLinear),
      claim_within("D", "Post-LN's output change grows about linearly in N (the theorem: O(N))", slope + ", Post-LN",
                   post, kAboutLinearLow, kAboutLinearHigh),
  };
  for (SubClaim& c : claims) c.quote = kQuote, c.where = kWhere;
  return claims;
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  Report r;
  r.setup = fmt::format(
      "normlab probe --analysis one-step,branch-noise --lr {:g} on each fresh init. branch-noise (judged): independent "
      "N(0, C = 1e-4) noise on every entry of every residual branch's output, Var[ΔF] = the mean square change of the "
      "stack's normalized output (what the head reads), over 4 draws on validation batches. one-step (evidence): "
      "one Adam step from the init on one batch, ‖ΔF‖² = output_change_rms², the logit change on that batch. Xavier "
      "init with unit-variance embeddings; Admin's ω by its closed form (log); N = 2L sub-layers.",
      kLr);
  Chart noise{"Var[ΔF] under independent branch noise against the number of sub-layers N (mean over seeds)", "N = 2L",
              "Var[ΔF]"};
  Chart adam{"one Adam step's output change ‖ΔF‖² against N (mean over seeds)", "N = 2L", "‖ΔF‖²"};
  noise.log_y = adam.log_y = true;
  Table noise_table{"Var[ΔF] under independent branch noise (mean over seeds)", {}};
  Table adam_table{"‖ΔF‖² after one Adam step (mean over seeds)", {}};
  auto slopes = slopes_of(o, runs, kBranchNoise, noise, noise_table);
  auto adam_slopes = slopes_of(o, runs, kAdamStep, adam, adam_table);
  r.charts = {noise, adam};
  r.tables = {noise_table, adam_table};
  r.claims = sub_claims(slopes);
  // A slope needs two depths: with one on the axis nothing is decided.
  for (SubClaim& c : r.claims)
    cannot_decide_unless(c, depths(o).size() >= 2, "the model.n_layers axis has one depth, a slope needs two");
  r.evidence = {fmt::format("Var[ΔF] slopes (independent branch noise): Post-LN {}, Pre-LN {}, Admin {}",
                            slopes["post"].show(), slopes["pre"].show(), slopes["admin"].show()),
                fmt::format("one Adam step's ‖ΔF‖² slopes (not judged: every branch moves the same way, so the changes "
                            "add up ∝ N² whatever the placement): Post-LN {}, Pre-LN {}, Admin {}",
                            adam_slopes["post"].show(), adam_slopes["pre"].show(), adam_slopes["admin"].show())};
  r.verdict_rule = fmt::format(
      "Growth is the least-squares slope of log Var[ΔF] against log N (1 = linear, 0 = flat; logarithmic growth gives "
      "a small slope), fitted per seed, Var[ΔF] under independent noise of the same variance on every branch's "
      "output (Theorem 2's perturbation). A: Post-LN's slope exceeds Pre-LN's by > {0:g}; B: Post-LN's exceeds "
      "Admin's by > {0:g}; C1, C2: Pre-LN's and Admin's slopes are < {1:g}; D: Post-LN's slope is within ({2:g}, "
      "{3:g}). The Adam step's slopes are evidence only.",
      kFasterBy, kLinear, kAboutLinearLow, kAboutLinearHigh);
  return r;
}

}  // namespace

extern const Study kOneStep{
    .name = "one-step",
    .title = "Output change under a perturbation of every residual branch, against depth (Admin's amplification)",
    .claim =
        "When every residual branch's output changes independently by the same variance C, Post-LN's output change "
        "Var[F(W) − F(W*)] grows about linearly with the number of sub-layers N, while Pre-LN's and Admin's grow only "
        "about logarithmically.",
    .source =
        "Liu et al. 2020, Understanding the Difficulty of Training Transformers (Admin, arXiv 2004.08249), §4, Thm 2.",
    .paper_setting =
        "Admin (Liu et al.) §4, Thm 2: the output change Var[F(x, W) − F(x, W*)] ≈ Σ_i β²_{N,i}·C, for a change of "
        "each residual branch bounded by C, grows like O(N) with the number of residual sub-layers N for Post-LN and "
        "like O(log N) for Pre-LN and Admin; encoder-decoders of 6–18 layers on IWSLT14 and WMT14 (RAdam, lr 7e-4 to "
        "1e-3).",
    .cost = "default ~20 s on 2 cores (3 to 5 seeds), --quick ~10 s",
    .axes = {{.key = "model.n_layers",
              .defaults = "3,6,12,24",
              .quick = "2,4,8",
              .large = "6,12,24,48",
              .description = "depths L (N = 2L sub-layers); each placement's growth is the log-log slope over all of "
                             "them (at least two)"}},
    .plan = plan,
    .judge = judge,
};

}  // namespace normlab::study
