// The Curse of Depth (Sun et al. 2025, Fig. 4): in Pre-LN the variance of the residual stream grows
// with depth during training (and a depth-scaled init does not stop it), so deep layers' branches are
// drowned out; LayerNorm Scaling (each norm output × 1/√ℓ) caps the growth. GPAS (Chen et al. 2025)
// caps it too, by scaling the stream down with a gate whose gradient passes unscaled.
#include <cmath>

#include "study/catalog.h"
#include "study/kit.h"

namespace normlab::study {

namespace {

TrainPreset preset(const StudyOptions& o) { return o.quick ? TrainPreset{4, 30, 10} : TrainPreset{12, 400, 40}; }

struct Variant {
  const char* id;
  const char* placement;
  const char* init;
  const char* label;
};
constexpr Variant kArms[] = {{"pre", "pre", "gpt2", "Pre-LN"},
                         {"pre-scaled", "pre", "scaled", "Pre-LN + scaled init"},
                         {"lns", "lns", "gpt2", "LayerNorm Scaling"},
                         {"gpas", "gpas", "gpt2", "GPAS"}};

std::vector<RunRequest> plan(const StudyOptions& o) {
  const TrainPreset p = preset(o);
  std::vector<RunRequest> runs;
  for (int seed = 1; seed <= o.seeds; ++seed)
    for (const Variant& a : kArms) {
      Json config = small_lm(a.placement, p.layers, p.steps, static_cast<uint64_t>(seed), p.steps / 10, p.probe_every);
      config["model"]["init"] = {{"scheme", a.init}};
      runs.push_back({seed_id(a.id, seed), config, "train", ""});
    }
  return runs;
}

Json last_stream(const std::vector<RunOutcome>& runs, const std::string& id) {
  const RunOutcome* run = find_run(runs, id);
  return run ? last_probe(run->dir / "run", "stream") : Json();
}

// The stream's mean square at the stack's output, and that ÷ the value entering layer 1 (last probe).
double top(const Json& stream) { return stream.is_null() ? NAN : numbers(stream["mean_square"]).back(); }
double growth(const Json& stream) { return stream.is_null() ? NAN : top(stream) / numbers(stream["mean_square"])[1]; }

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const TrainPreset p = preset(o);
  Report r;
  r.setup = fmt::format("{} layers, d 64, 4 heads, d_ff 256, T 64, batch 16, GPT-2 init (scaled init: output projections × "
                        "1/√(2L)), Adam lr 1e-3 (β2 0.98), {} warm-up steps, {} steps, stream probed every {} steps; {} seed(s){}.",
                        p.layers, p.steps / 10, p.steps, p.probe_every, o.seeds, o.quick ? " (quick preset)" : "");

  Chart profile{"stream mean square by layer at the end of training", "layer (L = the stack's output)", "E[x²]"};
  profile.log_y = true;
  Chart over_time{"stream mean square at the stack's output during training", "step", "E[x²]"};
  over_time.log_y = true;
  Table table{"At the end of training", {"arm", "E[x²] entering layer 1", "E[x²] at the output", "output ÷ layer 1", "val loss"}};
  std::vector<double> tops, growths;
  for (const Variant& a : kArms) {
    const std::string id1 = seed_id(a.id, 1);
    const Json s = last_stream(runs, id1);
    profile.series.push_back(layer_series(a.label, s, "mean_square"));
    Series t{a.label, {}, {}};
    if (const RunOutcome* run = find_run(runs, id1))
      for (const Json& j : probe_records(run->dir / "run", "stream")) t.x.push_back(j["step"].get<double>()), t.y.push_back(top(j));
    over_time.series.push_back(t);
    tops.push_back(seed_mean(o.seeds, [&](int seed) -> double { return top(last_stream(runs, seed_id(a.id, seed))); }));
    growths.push_back(seed_mean(o.seeds, [&](int seed) -> double { return growth(last_stream(runs, seed_id(a.id, seed))); }));
    table.rows.push_back({a.label, num(s.is_null() ? NAN : numbers(s["mean_square"])[1]), num(tops.back()), num(growths.back()), num(mean_val_loss(runs, a.id, o.seeds))});
  }
  r.charts = {profile, over_time};
  r.tables = {table, outcome_table("Runs", runs)};

  const bool a = growths[0] > 2, b = growths[1] > 2, c = tops[2] < 0.5 * tops[0], d = tops[3] < 0.5 * tops[0];
  r.evidence = {
      fmt::format("A. Pre-LN: output ÷ layer-1 mean square {} — {}", num(growths[0]), a ? "grows with depth (holds)" : "does not hold"),
      fmt::format("B. Pre-LN + scaled init: {} — {}", num(growths[1]), b ? "still grows (holds)" : "does not hold"),
      fmt::format("C. LayerNorm Scaling: output mean square {} vs Pre-LN {} (ratio {}) — {}", num(tops[2]), num(tops[0]),
                  num(tops[2] / tops[0]), c ? "capped (holds)" : "not below half (does not hold)"),
      fmt::format("D. GPAS: output mean square {} vs Pre-LN {} (ratio {}) — {}", num(tops[3]), num(tops[0]), num(tops[3] / tops[0]),
                  d ? "capped (holds)" : "not below half (does not hold)"),
  };
  // GPAS's gates are learned: SiLU(a) < 0 makes G amplify the stream instead of shrinking it.
  double gate_scale = 1;
  if (const RunOutcome* run = find_run(runs, seed_id("gpas", 1))) {
    const Json gates = last_probe(run->dir / "run", "scalar");
    for (double a_l : numbers(gates["value"])) gate_scale *= 1 - a_l / (1 + std::exp(-a_l));
    r.evidence.push_back(fmt::format("GPAS's learned gates at the end (seed 1): mean a = {}, so the gates together scale the "
                                     "stream by Π(1 − SiLU(a_ℓ)) = {} (< 1 shrinks it, > 1 amplifies it)",
                                     num(mean(numbers(gates["value"]))), num(gate_scale)));
  }
  r.verdict = combine_verdicts({a, b, c, d});
  r.verdict_rule = "From the last stream probe, seeds averaged. A: Pre-LN's stream mean square at the stack's output > 2× "
                   "that entering layer 1; B: the same for Pre-LN with scaled init; C: LayerNorm Scaling's output mean square "
                   "< 0.5× Pre-LN's; D: GPAS's < 0.5× Pre-LN's. All hold: reproduced; none: not reproduced; otherwise "
                   "inconclusive.";
  return r;
}

}  // namespace

extern const Study kDepthVariance{
    .name = "depth-variance",
    .title = "Per-layer stream variance during training: Pre-LN, scaled init, LayerNorm Scaling, GPAS",
    .claim = "During training Pre-LN's residual-stream variance grows with depth, also with a depth-scaled init; LayerNorm "
        "Scaling and GPAS keep the deep layers' variance much lower.",
    .source = "Sun et al. 2025, The Curse of Depth in Large Language Models (arXiv 2502.05795), Fig. 4; Chen et al. 2025, "
        "GPAS (arXiv 2506.22049).",
    .cost = "default ~4 min on 2 cores, --quick ~15 s",
    .plan = plan,
    .judge = judge,
};

}  // namespace normlab::study
