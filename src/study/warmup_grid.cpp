// Which cells of learning rate × warm-up × depth train, stall or diverge, for Post-LN, Pre-LN and the
// two Post-LN repairs that keep the norm after the residual: DeepNorm (a up-weighted residual and a
// down-scaled init) and Admin (a profiled residual weight ω).
//   Xiong et al. 2020 §3.2: Post-LN needs warm-up, Pre-LN does not.
//   Wang et al. 2022 (DeepNet) §3 and Liu et al. 2020 (Admin): both repairs train deep Post-LN stably.
#include <algorithm>
#include <cmath>

#include "study/catalog.h"
#include "study/kit.h"

namespace normlab::study {

namespace {

struct Grid {
  std::vector<double> lrs;
  std::vector<int> warmups, depths;
  int steps;
};
// The axes (sorted), and train.steps as --set leaves it. The quick preset has two depths: the shallow
// Post-LN cell (D) is its own.
Grid grid(const StudyOptions& o) {
  Grid g{o.number_axis("train.lr"), o.int_axis("train.warmup"), o.int_axis("model.n_layers"),
         configured(o, small_lm("pre", 1, o.quick ? 30 : 300, 1), "train.steps").get<int>()};
  std::sort(g.lrs.begin(), g.lrs.end()), std::sort(g.warmups.begin(), g.warmups.end());
  std::sort(g.depths.begin(), g.depths.end());
  return g;
}
constexpr const char* kPlacements[] = {"post", "pre", "deepnorm", "admin"};

std::string id_of(const std::string& placement, int layers, double lr, int warmup, int seed) {
  return fmt::format("{}-L{}-lr{:g}-w{}-s{}", placement, layers, lr, warmup, seed);
}

std::vector<RunRequest> plan(const StudyOptions& o) {
  const Grid g = grid(o);
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (int layers : g.depths)
      for (const char* placement : kPlacements)
        for (double lr : g.lrs)
          for (int warmup : g.warmups) {
            Json config = small_lm(placement, layers, g.steps, static_cast<uint64_t>(seed), warmup);
            use_xavier(config);
            config["train"]["lr"] = lr;
            runs.push_back({id_of(placement, layers, lr, warmup, seed), config, "train", ""});
          }
  return runs;
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const Grid g = grid(o);
  const int deep = g.depths.back(), shallow = g.depths.front();
  Report r;
  r.setup = "Linear warm-up then a constant lr; a cell shows its worst seed.";

  std::vector<std::string> header = {"placement", "depth", "warm-up"};
  for (double lr : g.lrs) header.push_back(fmt::format("lr {:g}", lr));
  Table table{std::string("Outcome and final training loss per cell (") + kStalledRule + ")", header};
  // A cell fails when it stalls or diverges (slow: still learning); a failed or missing run decides nothing.
  // Each sub-claim is decided on every seed separately (the cells of one seed), then over the seeds.
  const auto learned = [&](const std::string& placement, int layers, double lr, int warmup, int seed) {
    return train_result(find_run(runs, id_of(placement, layers, lr, warmup, seed))).learned();
  };
  std::vector<Truth> post_fails, rescued, repairs_train, shallow_post_trains;  // per seed
  std::vector<std::string> a_text, b_text, c_text, d_text;
  int repair_cells = 0;
  for (int seed : o.seeds) {
    int deep_post_cells = 0, deep_post_failing = 0, rescued_cells = 0, failing_repairs = 0;
    Truth fails = Truth::fails, rescue = Truth::fails, repairs = Truth::holds;
    std::vector<std::string> failures;
    repair_cells = 0;
    for (const char* placement : kPlacements)
      for (int layers : g.depths)
        for (int warmup : g.warmups)
          for (double lr : g.lrs) {
            const std::string p = placement;
            const Truth c = learned(p, layers, lr, warmup, seed);
            if (p == "post" && layers == deep && warmup == 0 && lr >= 1e-3) {
              ++deep_post_cells;
              fails = fails || !c;
              if (c == Truth::fails) {
                ++deep_post_failing;
                const Truth warmed = learned(p, layers, lr, g.warmups.back(), seed);
                rescue = rescue || warmed;
                rescued_cells += warmed == Truth::holds;
              }
            }
            if (p != "post") {
              ++repair_cells;
              repairs = repairs && c;
              if (c != Truth::holds) {
                ++failing_repairs;
                failures.push_back(fmt::format("{} L{} lr {:g} w{}", p, layers, lr, warmup));
              }
            }
          }
    const TrainResult shallow_post = train_result(find_run(runs, id_of("post", shallow, 1e-3, 0, seed)));
    post_fails.push_back(fails), rescued.push_back(rescue), repairs_train.push_back(repairs);
    shallow_post_trains.push_back(shallow_post.learned());
    a_text.push_back(fmt::format("seed {}: {} of {}", seed, deep_post_failing, deep_post_cells));
    b_text.push_back(fmt::format("seed {}: {} of {}", seed, rescued_cells, deep_post_failing));
    c_text.push_back(fmt::format("seed {}: {}{}{}", seed, failing_repairs, failures.empty() ? "" : " (",
                                 failures.empty() ? "" : fmt::format("{})", fmt::join(failures, "; "))));
    d_text.push_back(fmt::format("seed {}: {} {}", seed, shallow_post.outcome, num(shallow_post.final_loss)));
  }
  for (const char* placement : kPlacements)
    for (int layers : g.depths)
      for (int warmup : g.warmups) {
        std::vector<std::string> row = {placement, std::to_string(layers), std::to_string(warmup)};
        for (double lr : g.lrs) {
          const TrainResult c =
              worst_over_seeds(runs, o.seeds, [&](int seed) { return id_of(placement, layers, lr, warmup, seed); });
          row.push_back(c.outcome + " " + num(c.final_loss));
        }
        table.rows.push_back(row);
      }
  Truth a = decide_each(post_fails), b = decide_each(rescued), d = decide_each(shallow_post_trains);
  const Truth c = decide_each(repairs_train);
  r.tables.push_back(table);
  // What the sub-claims need from the axes; without it they cannot decide.
  const bool no_warmup = g.warmups.front() == 0, warmed = g.warmups.back() > 0,
             high_lr = std::any_of(g.lrs.begin(), g.lrs.end(), [](double lr) { return lr >= 1e-3; }),
             lr_1e3 = std::any_of(g.lrs.begin(), g.lrs.end(), [](double lr) { return std::abs(lr - 1e-3) < 1e-12; });
  const std::string lacks_a = !no_warmup ? "cannot decide: warm-up 0 is not on the train.warmup axis"
                              : !high_lr ? "cannot decide: no lr ≥ 1e-3 on the train.lr axis"
                                         : "",
                    lacks_b = !lacks_a.empty() ? lacks_a
                              : !warmed        ? "cannot decide: no warm-up > 0 on the train.warmup axis"
                                               : "",
                    lacks_d = !no_warmup ? lacks_a
                              : !lr_1e3  ? "cannot decide: lr 1e-3 is not on the train.lr axis"
                                         : "";
  if (!lacks_a.empty()) a = Truth::undecided;
  if (!lacks_b.empty()) b = Truth::undecided;
  if (!lacks_d.empty()) d = Truth::undecided;
  const auto say = [](const std::string& lacks, Truth t, std::string_view holds = "holds",
                      std::string_view fails = "does not hold") {
    return lacks.empty() ? said(t, holds, fails) : lacks;
  };

  for (int warmup : g.warmups) {
    Chart curves{fmt::format("training loss at depth {}, lr 1e-3, warm-up {} (seed {})", deep, warmup, o.seeds.front()),
                 "step", "loss"};
    for (const char* placement : kPlacements)
      curves.series.push_back(
          loss_series(placement, find_run(runs, id_of(placement, deep, 1e-3, warmup, o.seeds.front()))));
    r.charts.push_back(curves);
  }
  r.tables.push_back(outcome_table("Every run", runs));

  const size_t n = o.seeds.size();
  const std::string seeds = fmt::format("{} seed{}{}", n, n == 1 ? "" : "s", n == 1 ? ": indicative" : "");
  r.evidence = {
      fmt::format("A. Post-LN at depth {} without warm-up, lr ≥ 1e-3, cells that fail ({}): {} — {}", deep, seeds,
                  fmt::join(a_text, "; "), say(lacks_a, a)),
      fmt::format("B. with {} warm-up steps, those failing cells that train (or are slow): {} — {}", g.warmups.back(),
                  fmt::join(b_text, "; "), say(lacks_b, b, "rescued (holds)", "not rescued (does not hold)")),
      fmt::format("C. Pre-LN, DeepNorm and Admin: cells (of {}) that do not train: {} — {}", repair_cells,
                  fmt::join(c_text, "; "), said(c)),
      fmt::format("D. Post-LN at depth {}, lr 1e-3, no warm-up: {} — {}", shallow, fmt::join(d_text, "; "),
                  say(lacks_d, d)),
  };
  r.verdict = combine_verdicts({a, b, c, d});
  r.verdict_rule =
      std::string("Each cell is classified trained / slow / stalled / diverged (") + kStalledRule +
      "; diverged = a non-finite loss or gradient); stalled and diverged cells fail, slow ones do not. Each "
      "sub-claim is decided on each seed's grid: A: some deep Post-LN cell without warm-up at lr ≥ 1e-3 fails; "
      "B: one of those cells does not fail with the longest warm-up; C: no Pre-LN, DeepNorm or Admin cell fails; "
      "D: the shallowest Post-LN trains at lr 1e-3 without warm-up. A sub-claim holds when it holds on every "
      "seed, fails when it holds on none, and is unclear when the seeds disagree (one seed: indicative). All "
      "hold: reproduced; all fail: not reproduced; otherwise inconclusive.";
  return r;
}

}  // namespace

extern const Study kWarmupGrid{
    .name = "warmup-grid",
    .title = "Learning rate × warm-up × depth: where Post-LN, Pre-LN, DeepNorm and Admin train",
    .claim =
        "Deep Post-LN fails (stalls or diverges) without warm-up at the usual learning rates and warm-up rescues it; "
        "Pre-LN, DeepNorm and Admin train in every cell; shallow Post-LN trains without warm-up.",
    .source =
        "Xiong et al. 2020 (arXiv 2002.04745) §3.2; Wang et al. 2022, DeepNet (arXiv 2203.00555) §3, §5; Liu et al. "
        "2020, Admin (arXiv 2004.08249).",
    .cost = "default ~45 min on 2 cores (48 runs × 3 seeds), --quick ~50 s (16 runs)",
    .large =
        "model.d_model=256 model.n_heads=4 model.d_ff=1024 model.max_seq_len=128 train.seq_len=128 train.steps=1000",
    .axes = {{.key = "model.n_layers",
              .defaults = "6,12",
              .quick = "2,6",
              .large = "12,24",
              .description = "depths; A and B read the deepest, D the shallowest"},
             {.key = "train.lr",
              .defaults = "3e-4,1e-3,3e-3",
              .quick = "1e-3",
              .description = "learning rates (constant after warm-up); A and B read lr ≥ 1e-3, D lr 1e-3"},
             {.key = "train.warmup",
              .defaults = "0,150",
              .quick = "0,10",
              .large = "0,500",
              .description = "warm-up lengths in steps; A and D read 0, B the longest"}},
    .plan = plan,
    .judge = judge,
};

}  // namespace normlab::study
