// Liu et al. 2020 (Admin) Thm 2 / Fig. 4: after one Adam step from the initialization, the output
// change ‖F(x,W) − F(x,W*)‖² grows like O(N) with the number of sub-layers N in Post-LN (the
// amplification that destabilizes it) but only like O(log N) in Pre-LN and in Admin, whose ω is set
// from depth.
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
        runs.push_back(
            {id_of(placement, layers, seed), config, "probe", "one-step", {"--lr", fmt::format("{:g}", kLr)}});
      }
  return runs;
}

// ‖ΔF‖² (mean square over logits) per depth, for one seed.
std::vector<double> output_change(const std::vector<RunOutcome>& runs, const std::string& placement,
                                  const StudyOptions& o, int seed) {
  std::vector<double> out;
  for (int layers : depths(o))
    out.push_back(std::pow(
        number(run_analysis(find_run(runs, id_of(placement, layers, seed)), "one-step"), "output_change_rms"), 2));
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

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const std::vector<int> ds = depths(o);
  std::vector<double> sublayers;
  for (int l : ds) sublayers.push_back(2.0 * l);
  Report r;
  r.setup = fmt::format(
      "normlab probe --analysis one-step --lr {:g}: one Adam step from a fresh init on one batch, ‖ΔF‖² = "
      "mean square of the logit change on that same update batch (output_change_rms², every parameter moved, "
      "head included) — not Admin's own definition (the stack's output on another batch, stack_change_ms, "
      "which the probe also records); Xavier init with unit-variance embeddings; Admin's ω by its closed "
      "form (log); N = 2L sub-layers.",
      kLr);
  Chart chart{"one-step output change ‖ΔF‖² against the number of sub-layers N (mean over seeds)", "N = 2L", "‖ΔF‖²"};
  chart.log_y = true;
  Table table{"‖ΔF‖² after one step (mean over seeds)", {"placement"}};
  for (int l : ds) table.header.push_back(fmt::format("N = {}", 2 * l));
  table.header.push_back("log-log slope (per seed: mean ± sd)");
  std::map<std::string, SeedValues> slopes;  // by placement, the slope of each seed
  for (const char* placement : kPlacements) {
    const auto change =
        seed_mean_each(o.seeds, ds.size(), [&](int seed) { return output_change(runs, placement, o, seed); });
    slopes[placement] = over_seeds(
        o.seeds, [&](int seed) { return log_log_slope(sublayers, output_change(runs, placement, o, seed)); });
    chart.series.push_back({placement, sublayers, change});
    std::vector<std::string> row = {placement};
    for (double c : change) row.push_back(num(c));
    row.push_back(slopes[placement].show());
    table.rows.push_back(row);
  }
  r.charts.push_back(chart);
  r.tables.push_back(table);

  const SeedValues post = slopes["post"], pre = slopes["pre"], admin = slopes["admin"];
  const std::string slope = "least-squares slope of log ‖ΔF‖² against log N";
  r.claims = {
      claim_above("A", "Post-LN's one-step output change grows faster with depth than Pre-LN's",
                  slope + ", Post-LN − Pre-LN", difference(post, pre), 0.5),
      claim_above("B", "Admin damps Post-LN's growth", slope + ", Post-LN − Admin", difference(post, admin), 0.5),
      claim_below("C1", "Pre-LN's output change grows less than linearly in N (the theory: logarithmically)",
                  slope + ", Pre-LN", pre, 1.0),
      claim_below("C2", "Admin's output change grows less than linearly in N (the theory: logarithmically)",
                  slope + ", Admin", admin, 1.0),
  };
  // A slope needs two depths: with one on the axis nothing is decided.
  for (SubClaim& c : r.claims)
    cannot_decide_unless(c, ds.size() >= 2, "the model.n_layers axis has one depth, a slope needs two");
  r.evidence = {fmt::format("slopes: Post-LN {}, Pre-LN {}, Admin {}", post.show(), pre.show(), admin.show())};
  r.verdict_rule =
      "‖ΔF‖² is the logit change on the update batch (output_change_rms², not Admin's stack_change_ms). "
      "Growth is the least-squares slope of log ‖ΔF‖² against log N (1 = linear, 0 = flat; logarithmic growth "
      "gives a small slope), fitted per seed. A: Post-LN's slope exceeds Pre-LN's by > 0.5; B: Post-LN's exceeds "
      "Admin's by > 0.5; C1, C2: Pre-LN's and Admin's slopes are < 1.";
  return r;
}

}  // namespace

extern const Study kOneStep{
    .name = "one-step",
    .title = "Output change after one Adam step, against depth (Admin's amplification)",
    .claim =
        "After one optimizer step from init, Post-LN's output change ‖F(W) − F(W*)‖² grows about linearly with the "
        "number "
        "of sub-layers N, while Pre-LN's and Admin's grow only about logarithmically.",
    .source =
        "Liu et al. 2020, Understanding the Difficulty of Training Transformers (Admin, arXiv 2004.08249), Thm 2, Fig. "
        "4.",
    .paper_setting =
        "Admin (Liu et al.) §4, Thm 2, Fig. 4: the output change Var[F(x, W) − F(x, W*)] after an update grows like "
        "O(N) with the number of residual sub-layers N for Post-LN and like O(log N) for Pre-LN and Admin; "
        "encoder-decoders of 6–18 layers on IWSLT14 and WMT14 (RAdam, lr 7e-4 to 1e-3).",
    .cost = "default ~10 s on 2 cores (3 to 5 seeds), --quick ~10 s",
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
