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

// ---- The pre-registration ------------------------------------------------------------------------------------------
// Growth with depth is the least-squares slope of log Var[ΔF] against log N (N = 2L sub-layers; 1 = linear, 0 =
// flat, logarithmic growth gives a small slope), fitted per seed over the depth arms. Var[ΔF] is the branch-noise
// analysis's: independent noise of the same variance on every branch's output, Theorem 2's perturbation.

Json variables(const StudyOptions& o) {
  Json depth = Json::array(), sublayers = Json::array();
  for (int l : depths(o)) depth.push_back(l), sublayers.push_back(2 * l);
  return {{"depth", depth}, {"N", sublayers}, {"two_depths", depth.size() >= 2}};
}

const std::vector<ArmSpec> kClaimArms = {
    {"post-L{depth}", "Post-LN"}, {"pre-L{depth}", "Pre-LN"}, {"admin-L{depth}", "Admin"}};

// The arguments of an analysis number: Theorem 2's Var[ΔF] by default, or the Adam step's ‖ΔF‖² (its RMS squared).
Json number_args(const char* analysis = "branch-noise", const char* column = "output_change_var",
                 const char* power = "value") {
  return {{"analysis", analysis}, {"column", column}, {"power", power}};
}

// The number fitted over the depth arms of a placement.
Term growth(const std::string& placement, const Json& args = number_args()) {
  return {placement + "-L{depth}", "analysis_number", args, Extreme::log_log_slope, "N"};
}

// The paper's words (its abstract, verbatim) and Theorem 2 (paraphrased: its text was not at hand).
constexpr const char* kQuote =
    "\"heavy dependency on its residual branch makes training unstable, since it amplifies small parameter "
    "perturbations (e.g., parameter updates) and results in significant disturbances in the model output\" "
    "(abstract); Theorem 2 (paraphrase): Var[F(x0,W) − F(x0,W*)] ≈ Σ_i β²_{N,i}·C when each branch's change is "
    "bounded by C, O(log N) for Pre-LN and O(N) for Post-LN";
constexpr const char* kWhere = "Liu et al. 2020 (Admin), §4, Theorem 2";
const Need kTwoDepths{"two_depths", "the model.n_layers axis has one depth, a slope needs two"};

// Post-LN's growth against another placement's: faster by more than half a power of N.
ClaimSpec faster(std::string id, std::string statement, const std::string& other) {
  return {.id = std::move(id),
          .statement = std::move(statement),
          .quote = kQuote,
          .where = kWhere,
          .of = growth("post"),
          .against = growth(other),
          .compare = Compare::difference,
          .threshold = 0.5,
          .needs = {kTwoDepths}};
}

// A placement's growth below linear.
ClaimSpec sublinear(std::string id, std::string statement, const std::string& placement) {
  return {.id = std::move(id),
          .statement = std::move(statement),
          .quote = kQuote,
          .where = kWhere,
          .of = growth(placement),
          .side = SubClaim::Side::below,
          .threshold = 1.0,
          .needs = {kTwoDepths}};
}

const std::vector<ClaimSpec> kSubClaims = {
    faster("A", "Post-LN's output change grows faster with depth than Pre-LN's", "pre"),
    faster("B", "Admin damps Post-LN's growth", "admin"),
    sublinear("C1", "Pre-LN's output change grows less than linearly in N (the theorem: O(log N))", "pre"),
    sublinear("C2", "Admin's output change grows less than linearly in N (the theorem: O(log N))", "admin"),
    {.id = "D",
     .statement = "Post-LN's output change grows about linearly in N (the theorem: O(N))",
     .quote = kQuote,
     .where = kWhere,
     .of = growth("post"),
     .side = SubClaim::Side::within,
     .threshold = {0.5, 1.5},
     .needs = {kTwoDepths}},
};

// One chart and table of an analysis number against N: each placement's mean over seeds per depth, and its slopes.
void growth_chart(const StudyOptions& o, const std::vector<RunOutcome>& runs, const Json& args, Chart& chart,
                  Table& table) {
  const Json v = variables(o);
  table.header = {"placement"};
  for (const Json& n : v["N"]) table.header.push_back(fmt::format("N = {}", n.get<int>()));
  table.header.push_back("log-log slope (per seed: mean ± sd)");
  for (const char* placement : kPlacements) {
    Series series{placement, {}, {}};
    std::vector<std::string> row = {placement};
    for (const Json& l : v["depth"]) {
      const Term one{fmt::format("{}-L{}", placement, l.get<int>()), "analysis_number", args};
      const double m = measure_term(one, v, runs, o.seeds).mean();
      series.x.push_back(2.0 * l.get<int>()), series.y.push_back(m);
      row.push_back(num(m));
    }
    const SeedValues slope = measure_term(growth(placement, args), v, runs, o.seeds);
    row.push_back(slope.show());
    chart.series.push_back(series);
    table.rows.push_back(row);
  }
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
  const Json branch_noise = number_args(), adam_step = number_args("one-step", "output_change_rms", "squared");
  growth_chart(o, runs, branch_noise, noise, noise_table);
  growth_chart(o, runs, adam_step, adam, adam_table);
  r.charts = {noise, adam};
  r.tables = {noise_table, adam_table};
  const auto slope = [&](const char* placement, const Json& args) {
    return measure_term(growth(placement, args), variables(o), runs, o.seeds).show();
  };
  const auto slopes = [&](const Json& args) {
    return fmt::format("Post-LN {}, Pre-LN {}, Admin {}", slope("post", args), slope("pre", args),
                       slope("admin", args));
  };
  r.evidence = {
      fmt::format("Var[ΔF] slopes (independent branch noise): {}", slopes(branch_noise)),
      fmt::format("one Adam step's ‖ΔF‖² slopes (not judged: every branch moves the same way, so the changes add up ∝ "
                  "N² whatever the placement): {}",
                  slopes(adam_step))};
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
    .arms = kClaimArms,
    .variables = variables,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
