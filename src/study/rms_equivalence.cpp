// Jiang et al. 2023 (NeurIPS), "Pre-RMSNorm and Pre-CRMSNorm Transformers": a Pre-LN Transformer is
// arithmetically equivalent to a Pre-RMSNorm one whose branches and embeddings are re-centred (same
// weights), and to a Pre-CRMSNorm one on a stream one coordinate narrower (converted weights), and
// the RMS forms are cheaper. Here a Pre-LN model is trained, then compared with both forms
// (`normlab probe --analysis norm-equivalence`), and the three are timed training the same budget.
// That comparison applies the converter to the model it compares with, so it checks the code, not the
// claim; the verdict rests instead on the three forms trained separately from their own inits: if they
// are the same function class, they reach the same loss.
#include <cmath>
#include <map>

#include "study/catalog.h"
#include "study/kit.h"

namespace normlab::study {

namespace {

// The preset as --set leaves it (model.n_layers, train.steps; the probe interval scales with the steps).
TrainPreset preset(const StudyOptions& o) { return configured(o, o.quick ? TrainPreset{4, 30} : TrainPreset{6, 300}); }

constexpr Arm kArms[] = {{"pre", "Pre-LN"}, {"pre_rms", "Pre-RMSNorm"}, {"pre_crms", "Pre-CRMSNorm"}};
// Two forms of one function class reach the same loss within this much (nats).
constexpr double kSameLoss = 0.05;

std::vector<RunRequest> plan(const StudyOptions& o) {
  const TrainPreset p = preset(o);
  std::vector<RunRequest> runs;
  for (int seed = 1; seed <= o.seeds; ++seed)
    for (const Arm& a : kArms) {
      Json config = small_lm(a.id, p.layers, p.steps, static_cast<uint64_t>(seed), p.steps / 10);
      config["model"]["tied_embeddings"] = false;  // the CRMS conversion needs a separate head
      if (a.id == std::string("pre")) config["model"]["norm"] = {{"type", "layernorm"}, {"bias", false}};
      runs.push_back({seed_id(a.id, seed), config, "train", a.id == std::string("pre") ? "norm-equivalence" : ""});
    }
  return runs;
}

// The largest value of an equivalence column over seeds, for one precision and variant.
double worst(const std::vector<RunOutcome>& runs, int seeds, const std::string& precision, const std::string& variant,
             const std::string& column) {
  double w = NAN;
  for (int seed = 1; seed <= seeds; ++seed) {
    const RunOutcome* run = find_run(runs, fmt::format("pre-s{}", seed));
    Json a = run_analysis(run, "norm-equivalence");
    const std::vector<double> values = numbers(a, column);
    for (size_t i = 0; i < values.size(); ++i)
      if (a["precision"][i] == precision && a["variant"][i] == variant)
        w = std::isnan(w) ? values[i] : std::max(w, values[i]);
  }
  return w;
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  Report r;
  r.setup =
      "Bias-free LayerNorm for Pre-LN; the trained Pre-LN checkpoint is also converted and compared on one validation "
      "batch in fp32 and fp64; throughput = tokens ÷ training wall time (runs share the machine: use --jobs 1 for "
      "cleaner timings).";
  Table eq{"Check of the converter: largest difference from the Pre-LN model (over seeds)",
           {"precision", "variant", "logits: max |Δ| ÷ max(max |z|, 1)", "loss |Δ|", "gradients: max relative error"}};
  bool converts = true;
  for (const char* precision : {"fp32", "fp64"}) {
    const double tol = precision == std::string("fp32") ? 1e-4 : 1e-10;
    for (const char* variant : {"pre_rms", "pre_crms"}) {
      const double logits = worst(runs, o.seeds, precision, variant, "logits_max_error");
      const double loss = worst(runs, o.seeds, precision, variant, "loss_error");
      const double grads = worst(runs, o.seeds, precision, variant, "grad_max_rel_error");
      eq.rows.push_back({precision, variant, num(logits), num(loss),
                         variant == std::string("pre_rms") ? num(grads) : "(weights differ)"});
      converts =
          converts && logits <= tol && loss <= tol * 10 && (variant != std::string("pre_rms") || grads <= tol * 10);
    }
  }
  Table speed{"Training",
              {"placement", "final val loss (mean over seeds)", "− Pre-LN", "tokens/s (mean over seeds)", "÷ Pre-LN"}};
  Chart curves{"training loss", "step", "loss"};
  std::map<std::string, double> throughput, val;  // by arm id
  for (const Arm& a : kArms) {
    throughput[a.id] = seed_mean(o.seeds, [&](int seed) -> double {
      const RunOutcome* run = find_run(runs, seed_id(a.id, seed));
      return run ? number(run->config["train"], "steps") * number(run->config["train"], "batch_size") *
                       number(run->config["train"], "seq_len") / train_result(run).seconds
                 : NAN;
    });
    val[a.id] = seed_mean(o.seeds, [&](int seed) -> double {
      const TrainResult t = train_result(find_run(runs, seed_id(a.id, seed)));
      return t.outcome == "diverged" ? INFINITY : t.val_loss;
    });
    speed.rows.push_back({a.label, num(val[a.id]), num(val[a.id] - val["pre"]), fmt::format("{:.0f}", throughput[a.id]),
                          num(throughput[a.id] / throughput["pre"])});
    curves.series.push_back(loss_series(a.label, find_run(runs, seed_id(a.id, 1))));
  }
  r.tables = {speed, eq, outcome_table("Runs", runs)};
  r.charts.push_back(curves);

  // A form that diverged, or a Pre-LN that diverged, matches nothing.
  const auto matches = [&](const std::string& id) {
    return std::isinf(val[id]) || std::isinf(val["pre"]) ? Truth::fails
                                                         : less(std::abs(val[id] - val["pre"]), kSameLoss);
  };
  const Truth same = matches("pre_rms") && matches("pre_crms");
  const Truth faster =
      greater(throughput["pre_rms"], throughput["pre"]) && greater(throughput["pre_crms"], throughput["pre"]);
  r.evidence = {
      fmt::format(
          "A. final validation loss trained from each form's own init: Pre-LN {}, Pre-RMSNorm {} ({}), Pre-CRMSNorm {} "
          "({}) — {}",
          num(val["pre"]), num(val["pre_rms"]), num(val["pre_rms"] - val["pre"]), num(val["pre_crms"]),
          num(val["pre_crms"] - val["pre"]),
          said(same, "the same loss (holds)", "not within 0.05 nats (does not hold)")),
      fmt::format("B. throughput ÷ Pre-LN: Pre-RMSNorm {}, Pre-CRMSNorm {} — {}",
                  num(throughput["pre_rms"] / throughput["pre"]), num(throughput["pre_crms"] / throughput["pre"]),
                  said(faster, "both faster (holds)", "not both faster (does not hold)")),
      fmt::format("Check (not in the verdict): the trained Pre-LN converted to Pre-RMSNorm differs in its logits by {} "
                  "(fp32) / {} "
                  "(fp64), in its gradients by {} / {}; to Pre-CRMSNorm by {} / {} — {}",
                  eq.rows[0][2], eq.rows[2][2], eq.rows[0][4], eq.rows[2][4], eq.rows[1][2], eq.rows[3][2],
                  converts ? "equal within rounding" : "NOT equal: the converter or a norm is wrong"),
  };
  r.verdict = combine_verdicts({same, faster});
  r.verdict_rule =
      "Seeds averaged. A: Pre-RMSNorm and Pre-CRMSNorm, each trained from its own init, end within 0.05 nats of "
      "Pre-LN's final validation loss (a diverged run matches nothing); B: both RMS forms train more tokens per "
      "second than Pre-LN. Both: reproduced; neither: not reproduced; otherwise inconclusive. The converter check "
      "(logits ≤ 1e-4 in fp32 and ≤ 1e-10 in fp64 relative to their scale) is shown, not judged: it holds by "
      "construction unless the code is wrong.";
  return r;
}

}  // namespace

extern const Study kRmsEquivalence{
    .name = "rms-equivalence",
    .title = "Pre-LN ≡ Pre-RMSNorm ≡ Pre-CRMSNorm: equal outputs, and the speed difference",
    .claim =
        "A Pre-LN Transformer computes exactly the same function as its Pre-RMSNorm form (same weights, centred "
        "branches) "
        "and its Pre-CRMSNorm form (converted weights), with equal gradients for Pre-RMSNorm; the RMS forms train "
        "faster.",
    .source = "Jiang, Gu, Zhu, Pan 2023, Pre-RMSNorm and Pre-CRMSNorm Transformers (NeurIPS 2023, arXiv 2305.14858).",
    .cost = "default ~1 min on 2 cores (--jobs 1 for clean timings), --quick ~15 s",
    .plan = plan,
    .judge = judge,
};

}  // namespace normlab::study
