// Jiang et al. 2023 (NeurIPS), "Pre-RMSNorm and Pre-CRMSNorm Transformers": a Pre-LN Transformer is
// arithmetically equivalent to a Pre-RMSNorm one whose branches and embeddings are re-centred (same
// weights), and to a Pre-CRMSNorm one on a stream one coordinate narrower (converted weights), and
// the RMS forms are cheaper. Here a Pre-LN model is trained, then compared with both forms
// (`normlab probe --analysis norm-equivalence`), and the three are timed training the same budget.
#include <cmath>

#include "study/catalog.h"
#include "study/kit.h"

namespace normlab::study {

namespace {

TrainPreset preset(const StudyOptions& o) { return o.quick ? TrainPreset{4, 30} : TrainPreset{6, 300}; }

constexpr Arm kArms[] = {{"pre", "Pre-LN"}, {"pre_rms", "Pre-RMSNorm"}, {"pre_crms", "Pre-CRMSNorm"}};

std::vector<RunRequest> plan(const StudyOptions& o) {
  const TrainPreset p = preset(o);
  std::vector<RunRequest> runs;
  for (int seed = 1; seed <= o.seeds; ++seed)
    for (const Arm& a : kArms) {
      Json config = small_lm(a.id, p.layers, p.steps, static_cast<uint64_t>(seed), p.steps / 10);
      config["model"]["tied_embeddings"] = false;  // the CRMS conversion needs a separate head
      if (a.id == std::string("pre")) config["model"]["norm"] = {{"type", "layernorm"}, {"bias", false}};
      runs.push_back({seed_id(a.id, seed), config, "train",
                      a.id == std::string("pre") ? "norm-equivalence" : ""});
    }
  return runs;
}

// The largest value of an equivalence column over seeds, for one precision and variant.
double worst(const std::vector<RunOutcome>& runs, int seeds, const std::string& precision, const std::string& variant,
             const std::string& column) {
  double w = NAN;
  for (int seed = 1; seed <= seeds; ++seed) {
    const RunOutcome* run = find_run(runs, fmt::format("pre-s{}", seed));
    if (!run || run->status != RunStatus::finished) continue;
    const Json a = read_analysis(run->dir, "norm-equivalence");
    for (size_t i = 0; i < a["variant"].size(); ++i)
      if (a["precision"][i] == precision && a["variant"][i] == variant && a[column][i].is_number())
        w = std::isnan(w) ? a[column][i].get<double>() : std::max(w, a[column][i].get<double>());
  }
  return w;
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const TrainPreset p = preset(o);
  Report r;
  r.setup = fmt::format("{} layers, d 64, 4 heads, d_ff 256, T 64, batch 16, untied embeddings, bias-free LayerNorm for Pre-LN; "
                        "{} training steps each; the trained Pre-LN checkpoint is compared on one validation batch in fp32 "
                        "and fp64; throughput = tokens ÷ training wall time (runs share the machine: use --jobs 1 for "
                        "cleaner timings); {} seed(s){}.",
                        p.layers, p.steps, o.seeds, o.quick ? " (quick preset)" : "");
  Table eq{"Largest difference from the Pre-LN model (over seeds)",
           {"precision", "variant", "logits: max |Δ| ÷ max(max |z|, 1)", "loss |Δ|", "gradients: max relative error"}};
  bool equal = true;
  for (const char* precision : {"fp32", "fp64"}) {
    const double tol = precision == std::string("fp32") ? 1e-4 : 1e-10;
    for (const char* variant : {"pre_rms", "pre_crms"}) {
      const double logits = worst(runs, o.seeds, precision, variant, "logits_max_error");
      const double loss = worst(runs, o.seeds, precision, variant, "loss_error");
      const double grads = worst(runs, o.seeds, precision, variant, "grad_max_rel_error");
      eq.rows.push_back({precision, variant, num(logits), num(loss), variant == std::string("pre_rms") ? num(grads) : "(weights differ)"});
      equal = equal && logits <= tol && loss <= tol * 10 && (variant != std::string("pre_rms") || grads <= tol * 10);
    }
  }
  Table speed{"Training throughput", {"placement", "tokens/s (mean over seeds)", "÷ Pre-LN", "final train loss"}};
  Chart curves{"training loss", "step", "loss"};
  std::vector<double> throughput;
  for (const Arm& a : kArms) {
    throughput.push_back(seed_mean(o.seeds, [&](int seed) -> double {
      const TrainResult t = train_result(find_run(runs, seed_id(a.id, seed)));
      return double(p.steps) * 16 * 64 / t.seconds;
    }));
    const double loss = seed_mean(o.seeds, [&](int seed) -> double { return train_result(find_run(runs, seed_id(a.id, seed))).final_loss; });
    speed.rows.push_back({a.label, fmt::format("{:.0f}", throughput.back()), num(throughput.back() / throughput[0]), num(loss)});
    curves.series.push_back(loss_series(a.label, find_run(runs, seed_id(a.id, 1))));
  }
  r.tables = {eq, speed, outcome_table("Runs", runs)};
  r.charts.push_back(curves);

  const bool faster = throughput[1] > throughput[0] && throughput[2] > throughput[0];
  r.evidence = {
      fmt::format("A. equality: Pre-RMSNorm logits differ by {} (fp32) / {} (fp64), gradients by {} / {}; Pre-CRMSNorm logits by "
                  "{} / {} — {}",
                  eq.rows[0][2], eq.rows[2][2], eq.rows[0][4], eq.rows[2][4], eq.rows[1][2], eq.rows[3][2],
                  equal ? "equal within rounding (holds)" : "NOT equal (does not hold)"),
      fmt::format("B. throughput ÷ Pre-LN: Pre-RMSNorm {}, Pre-CRMSNorm {} — {}", num(throughput[1] / throughput[0]),
                  num(throughput[2] / throughput[0]), faster ? "both faster (holds)" : "not both faster (does not hold)"),
  };
  r.verdict = combine_verdicts({equal, faster});
  r.verdict_rule = "A: on every seed, logits differ from Pre-LN's by ≤ 1e-4 (fp32) and ≤ 1e-10 (fp64) relative to their scale, "
                   "the loss by ≤ 10× that, and Pre-RMSNorm's gradients by ≤ 10× that (relative, per parameter); B: both RMS "
                   "forms train more tokens per second than Pre-LN (seeds averaged). Both: reproduced; neither: not "
                   "reproduced; otherwise inconclusive.";
  return r;
}

}  // namespace

extern const Study kRmsEquivalence{
    .name = "rms-equivalence",
    .title = "Pre-LN ≡ Pre-RMSNorm ≡ Pre-CRMSNorm: equal outputs, and the speed difference",
    .claim = "A Pre-LN Transformer computes exactly the same function as its Pre-RMSNorm form (same weights, centred branches) "
        "and its Pre-CRMSNorm form (converted weights), with equal gradients for Pre-RMSNorm; the RMS forms train faster.",
    .source = "Jiang, Gu, Zhu, Pan 2023, Pre-RMSNorm and Pre-CRMSNorm Transformers (NeurIPS 2023, arXiv 2305.14858).",
    .cost = "default ~1 min on 2 cores (--jobs 1 for clean timings), --quick ~15 s",
    .plan = plan,
    .judge = judge,
};

}  // namespace normlab::study
