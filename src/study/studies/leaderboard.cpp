// Every placement in the registry trained on the same token budget under one learning-rate rule per
// family, over several seeds: final validation loss with its spread, and which ones diverged or
// stalled. The claim tested is the survey's starting point (Pre-LN displaced Post-LN: it converges faster at the
// same learning rate); the ranking is the reference a user compares a new variant against.
#include <algorithm>
#include <cmath>

#include "model/formula.h"
#include "model/placement.h"
#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// The preset as --set leaves it (model.n_layers, train.steps; the probe interval scales with the steps).
TrainPreset preset(const StudyOptions& o) { return configured(o, o.quick ? TrainPreset{2, 20} : TrainPreset{6, 300}); }

// The rule, decided before any run (not tuned here): 1e-3 for the families whose stream is not
// normalized after the residual add, 5e-4 for those that normalize it (Post-LN and its repairs,
// which Xiong et al. show need smaller steps or warm-up) and for the norm-free ones (no norm bounds
// their activations); every family gets 10% linear warm-up, then cosine decay, and clipping at 1.
struct Family {
  const char* name;
  double lr;
  std::vector<std::string_view> members;
};
const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"post-norm",
       5e-4,
       {"post", "dlcl_post", "admin", "deepnorm", "residual", "mixln", "hybridnorm", "hybridnorm_star"}},
      {"norm-free", 5e-4, {"rezero", "tfixup", "dyt"}},
  };
  return f;
}
std::pair<std::string, double> family_of(std::string_view placement) {
  for (const Family& f : families())
    if (std::find(f.members.begin(), f.members.end(), placement) != f.members.end()) return {f.name, f.lr};
  return {"pre-norm", 1e-3};
}

double lr_of(std::string_view family) {
  for (const Family& f : families())
    if (f.name == family) return f.lr;
  return 1e-3;  // pre-norm
}

// One row of the ranking: a built-in placement, or a formula (--grid model.placement=all,@my.json), which joins the
// family its equation puts it in: its output a norm's (the stream normalized after the add) post-norm, no norm at
// all norm-free, else pre-norm.
struct Arm {
  Json placement;     // the runs' model.placement
  std::string label;  // its name: the row and the runs' ids
  std::string family;
  double lr;
};

std::vector<Arm> arms(const StudyOptions& o) {
  std::vector<Arm> out;
  const auto builtin = [&](const std::string& name) {
    const auto [family, lr] = family_of(name);
    out.push_back({name, name, family, lr});
  };
  for (const Json& value : o.axis("model.placement")) {
    if (value == "all") {
      for (const std::string& name : model::placement_names()) builtin(name);
    } else if (!model::is_formula(value)) {
      builtin(value.get<std::string>());
    } else {
      const auto formula = model::Formula::read(value, "--grid model.placement");
      const std::string family = formula->normalizes_stream() ? "post-norm"
                                 : formula->norm_free()       ? "norm-free"
                                                              : "pre-norm";
      out.push_back({value, formula->name(), family, lr_of(family)});
    }
  }
  return out;
}

bool ranks(const std::vector<Arm>& rows, std::string_view placement) {
  return std::any_of(rows.begin(), rows.end(), [&](const Arm& a) { return a.label == placement; });
}

// A compares Pre-LN with Post-LN at one learning rate, as Xiong et al. §4.2 do (lr_max 5e-4 for both): a Pre-LN run at
// Post-LN's rate beside the ranking, which keeps each family's own rate.
constexpr const char* kPreAtPostLr = "pre-at-post-lr";
constexpr double kPreLnLowerBy = 0.0;  // A: Pre-LN − Post-LN (nats), at most
bool compares_at_one_lr(const std::vector<Arm>& rows) { return ranks(rows, "pre") && ranks(rows, "post"); }

Json run_config(const TrainPreset& p, int seed, const Json& placement, double lr) {
  Json config = small_lm("pre", p.layers, p.steps, static_cast<uint64_t>(seed), p.steps / 10);
  config["model"]["placement"] = placement;
  config["train"]["lr"] = lr;
  config["train"]["schedule"] = "cosine";
  config["train"]["clip"] = 1.0;
  return config;
}

std::vector<RunRequest> plan(const StudyOptions& o) {
  const TrainPreset p = preset(o);
  const std::vector<Arm> rows = arms(o);
  std::vector<RunRequest> runs;
  for (int seed : o.seeds) {
    for (const Arm& arm : rows)
      runs.push_back({seed_id(arm.label, seed), run_config(p, seed, arm.placement, arm.lr), "train", ""});
    if (compares_at_one_lr(rows))
      runs.push_back({seed_id(kPreAtPostLr, seed), run_config(p, seed, "pre", family_of("post").second), "train", ""});
  }
  return runs;
}

struct Entry {
  std::string placement, family;
  double lr, mean, sd, lo, hi;
  int trained = 0, slow = 0, diverged = 0, stalled = 0, failed = 0;  // failed: the run failed or is missing
};

// Each placement's runs over the seeds: outcome counts and the spread of its final validation losses, best first.
std::vector<Entry> ranked_entries(const StudyOptions& o, const std::vector<Arm>& rows,
                                  const std::vector<RunOutcome>& runs) {
  std::vector<Entry> entries;
  for (const Arm& arm : rows) {
    const std::string& placement = arm.label;
    Entry e{placement, arm.family, arm.lr, NAN, NAN, INFINITY, -INFINITY};
    std::vector<double> vals;
    for (int seed : o.seeds) {
      const TrainResult t = train_result(find_run(runs, seed_id(placement, seed)));
      e.trained += t.outcome == Outcome::trained, e.slow += t.outcome == Outcome::slow;
      e.diverged += t.outcome == Outcome::diverged, e.stalled += t.outcome == Outcome::stalled;
      e.failed += t.outcome == Outcome::failed || t.outcome == Outcome::missing;
      if (t.outcome != Outcome::diverged) vals.push_back(t.val_loss);  // a failed seed's NaN makes the mean NaN
    }
    if (!vals.empty()) {
      e.mean = mean(vals);
      double ss = 0;
      for (double v : vals) ss += (v - e.mean) * (v - e.mean), e.lo = std::min(e.lo, v), e.hi = std::max(e.hi, v);
      e.sd = vals.size() > 1 ? std::sqrt(ss / static_cast<double>(vals.size() - 1)) : 0;
    }
    entries.push_back(e);
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return (std::isnan(a.mean) ? INFINITY : a.mean) < (std::isnan(b.mean) ? INFINITY : b.mean);
  });
  return entries;
}

// The ranking as a table and a chart; returns the runs that diverged, stalled and failed, summed.
struct Totals {
  int diverged = 0, stalled = 0, failed = 0;
};
Totals add_ranking(Report& r, const std::vector<Entry>& entries, const std::vector<RunOutcome>& runs) {
  Table table{"Ranking by mean final validation loss",
              {"rank", "placement", "family", "lr", "val loss (mean)", "± sd", "min – max",
               "runs trained / slow / stalled / diverged / failed"}};
  Chart bars{"final validation loss by rank (mean over seeds)", "rank", "val loss"};
  Series means{"mean", {}, {}}, lows{"min", {}, {}}, highs{"max", {}, {}};
  Totals totals;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    table.rows.push_back({std::to_string(i + 1), e.placement, e.family, fmt::format("{:g}", e.lr), num(e.mean),
                          num(e.sd), std::isfinite(e.lo) ? num(e.lo) + " – " + num(e.hi) : "n/a",
                          fmt::format("{} / {} / {} / {} / {}", e.trained, e.slow, e.stalled, e.diverged, e.failed)});
    table.row_class.emplace_back(outcome_name(e.diverged || e.failed ? Outcome::diverged
                                              : e.stalled            ? Outcome::stalled
                                              : e.slow               ? Outcome::slow
                                                                     : Outcome::trained));
    means.x.push_back(double(i + 1)), means.y.push_back(e.mean);
    lows.x.push_back(double(i + 1)), lows.y.push_back(std::isfinite(e.lo) ? e.lo : NAN);
    highs.x.push_back(double(i + 1)), highs.y.push_back(std::isfinite(e.hi) ? e.hi : NAN);
    totals.diverged += e.diverged, totals.stalled += e.stalled, totals.failed += e.failed;
  }
  bars.series = {means, lows, highs};
  r.charts.push_back(bars);
  r.tables = {table, outcome_table("Every run", runs)};

  return totals;
}

// A placement's final validation loss per seed (a diverged run counts as the unigram entropy).
SeedValues final_val_loss(const StudyOptions& o, const std::vector<RunOutcome>& runs, const std::string& placement) {
  return measure_term({placement, "final_val_loss"}, Json::object(), runs, o.seeds);
}

// ---- The pre-registration ------------------------------------------------------------------------------------------
// Whether every placement trains under one shared rule is this lab's own question, which no paper asks: the ranking
// shows each placement's outcome counts, and the verdict rests on the paper's comparison alone.

Json variables(const StudyOptions& o) {
  return {{"post_lr", family_of("post").second}, {"compares_at_one_lr", compares_at_one_lr(arms(o))}};
}

const std::vector<ClaimSpec> kSubClaims = {
    {.id = "A",
     .statement = "Pre-LN ends below Post-LN at the same learning rate",
     .quote = "\"the Pre-LN Transformer converges faster than the Post-LN Transformer using the same lr_max\"",
     .where = "Xiong et al. 2020, §4.2, Fig. 4",
     .of = {kPreAtPostLr, "final_val_loss"},
     .against = Term{"post", "final_val_loss"},
     .compare = Compare::difference,
     .side = SubClaim::Side::below,
     .threshold = kPreLnLowerBy,
     .needs = {{"compares_at_one_lr", "A compares pre with post, and the model.placement axis lacks one of them"}}},
};

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  Report r;
  const std::vector<Arm> rows = arms(o);
  const auto formulas =
      std::count_if(rows.begin(), rows.end(), [](const Arm& a) { return model::is_formula(a.placement); });
  r.setup = fmt::format(
      "{}{} placements{}, each with its default init; lr by family: pre-norm 1e-3, post-norm 5e-4, "
      "norm-free 5e-4 (a fixed rule, not tuned here); final validation loss on 4 batches.",
      formulas == 0 && rows.size() == model::placement_names().size() ? "All " : "", rows.size(),
      formulas == 0 ? std::string()
                    : fmt::format(" ({} of them formulas, each in the family its equation puts it in: its output a "
                                  "norm's post-norm, no norm norm-free, else pre-norm)",
                                  formulas));
  const std::vector<Entry> entries = ranked_entries(o, rows, runs);
  const Totals totals = add_ranking(r, entries, runs);
  const SeedValues pre = final_val_loss(o, runs, "pre"), post = final_val_loss(o, runs, "post"),
                   pre_at_post_lr = final_val_loss(o, runs, kPreAtPostLr);
  r.evidence = {
      fmt::format("runs that diverged: {}; that stalled: {}; that failed: {} (of {}; not judged: no paper claims that "
                  "every placement trains under one rule)",
                  totals.diverged, totals.stalled, totals.failed, entries.size() * o.seeds.size()),
      fmt::format("val loss at each family's lr: Pre-LN {} vs Post-LN {}; at Post-LN's lr: Pre-LN {}", pre.show(),
                  post.show(), pre_at_post_lr.show()),
      fmt::format("best: {} ({}); worst: {} ({})", entries.front().placement, num(entries.front().mean),
                  entries.back().placement, num(entries.back().mean)),
  };
  r.verdict_rule =
      "A's Pre-LN run sits beside the ranking, which keeps each family's learning rate; the ranking's outcome counts "
      "are shown, not judged.";
  return r;
}

}  // namespace

extern const Study kLeaderboard{
    .name = "leaderboard",
    .title = "Leaderboard: every placement, same budget, same learning-rate rule",
    .claim =
        "Pre-LN ends below Post-LN at the same learning rate; the ranking of every placement under one shared "
        "training rule is the reference a new variant is compared with.",
    .source =
        "The survey's starting point: Xiong et al. 2020 (arXiv 2002.04745) and the variants' own papers (normlab "
        "variants).",
    .paper_setting =
        "Each placement's own paper, at its own scale and learning rate (`normlab variants NAME`); the shared rule "
        "here (lr by family, cosine decay, 10% warm-up, clipping at 1) is normlab's, not a paper's.",
    .cost = "default ~21 min on 2 cores (26 × 3 runs), --quick ~25 s",
    .large = "model.n_layers=12 train.steps=2000",
    .axes = {{.key = "model.placement",
              .defaults = "all",
              .quick = "all",
              .description = "the placements ranked: all (every built-in one), names, and formulas (@my.json, "
                             "docs/variants.md), e.g. --grid model.placement=all,@my.json"}},
    .plan = plan,
    .arms = {{kPreAtPostLr, "Pre-LN at lr {post_lr}"}, {"post", "Post-LN"}},
    .variables = variables,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
