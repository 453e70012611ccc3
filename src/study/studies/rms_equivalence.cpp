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

#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// The preset as --set leaves it (model.n_layers, train.steps; the probe interval scales with the steps).
TrainPreset preset(const StudyOptions& o) { return configured(o, o.quick ? TrainPreset{4, 30} : TrainPreset{6, 300}); }

constexpr Arm kArms[] = {{"pre", "Pre-LN"}, {"pre_rms", "Pre-RMSNorm"}, {"pre_crms", "Pre-CRMSNorm"}};
// Two forms of one function class reach the same loss within this much (nats).
constexpr double kSameLoss = 0.05;
// The converted model's logits equal the original's within this relative error (rounding, not a defect).
constexpr double kConvertedFp32 = 1e-4, kConvertedFp64 = 1e-10;

std::vector<RunRequest> plan(const StudyOptions& o) {
  const TrainPreset p = preset(o);
  std::vector<RunRequest> runs;
  // Seed by seed, the three forms in turn (A B C A B C ...), each run alone on the machine
  // (exclusive), so their training times compare: no run shares the cores, and a slow phase of the
  // machine hits every form of a round alike.
  for (int seed : o.seeds)
    for (const Arm& a : kArms) {
      Json config = small_lm(a.id, p.layers, p.steps, static_cast<uint64_t>(seed), p.steps / 10);
      config["model"]["tied_embeddings"] = false;  // the CRMS conversion needs a separate head
      if (a.id == std::string("pre")) config["model"]["norm"] = {{"type", "layernorm"}, {"bias", false}};
      RunRequest run{seed_id(a.id, seed), config, "train", a.id == std::string("pre") ? "norm-equivalence" : ""};
      run.exclusive = true;
      runs.push_back(run);
    }
  return runs;
}

// The largest value of an equivalence column over seeds, for one precision and variant.
double worst(const std::vector<RunOutcome>& runs, const std::vector<int>& seeds, const std::string& precision,
             const std::string& variant, const std::string& column) {
  double w = NAN;
  for (int seed : seeds) {
    const RunOutcome* run = find_run(runs, seed_id("pre", seed));
    Json a = run_analysis(run, "norm-equivalence");
    const std::vector<double> values = numbers(a, column);
    for (size_t i = 0; i < values.size(); ++i)
      if (a["precision"][i] == precision && a["variant"][i] == variant)
        w = std::isnan(w) ? values[i] : std::max(w, values[i]);
  }
  return w;
}

// Training tokens ÷ training wall time of each seed's run of one arm.
SeedValues tokens_per_second(const StudyOptions& o, const std::vector<RunOutcome>& runs, const std::string& arm) {
  return over_seeds(o.seeds, [&](int seed) -> double {
    const RunOutcome* run = find_run(runs, seed_id(arm, seed));
    return run ? number(run->config["train"], "steps") * number(run->config["train"], "batch_size") *
                     number(run->config["train"], "seq_len") / train_result(run).seconds
               : NAN;
  });
}

// The converter check (not in the verdict): the trained Pre-LN converted to each RMS form, its largest differences
// per precision and variant; `converts` says whether all lie within rounding.
Table converter_check(const StudyOptions& o, const std::vector<RunOutcome>& runs, bool& converts) {
  Table eq{"Check of the converter: largest difference from the Pre-LN model (over seeds)",
           {"precision", "variant", "logits: max |Δ| ÷ max(max |z|, 1)", "loss |Δ|", "gradients: max relative error"}};
  converts = true;
  for (const char* precision : {"fp32", "fp64"}) {
    const double tol = precision == std::string("fp32") ? kConvertedFp32 : kConvertedFp64;
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
  return eq;
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  Report r;
  r.setup =
      "Bias-free LayerNorm for Pre-LN; the trained Pre-LN checkpoint is also converted and compared on one validation "
      "batch in fp32 and fp64; throughput = tokens ÷ training wall time, each run timed alone (no other run of the "
      "study beside it; --threads / --jobs threads), the forms alternated seed by seed (Pre-LN, Pre-RMSNorm, "
      "Pre-CRMSNorm, Pre-LN ...). Other programs on the machine still disturb the timings.";
  bool converts = true;
  const Table eq = converter_check(o, runs, converts);
  Table speed{"Training (over seeds)",
              {"placement", "final val loss", "− Pre-LN (per seed)", "tokens/s", "÷ Pre-LN (per seed)"}};
  Chart curves{fmt::format("training loss (seed {})", o.seeds.front()), "step", "loss"};
  std::map<std::string, SeedValues> throughput, val;  // by arm id, per seed
  for (const Arm& a : kArms) {
    throughput[a.id] = tokens_per_second(o, runs, a.id);
    val[a.id] = over_seeds(o.seeds, [&](int seed) { return val_loss_or_unigram(find_run(runs, seed_id(a.id, seed))); });
  }
  const auto gap = [&](const std::string& id) { return difference(val[id], val["pre"]); };
  for (const Arm& a : kArms) {
    const std::string id = a.id;
    speed.rows.push_back({a.label, val[id].show(), id == "pre" ? "0" : gap(id).show(),
                          fmt::format("{:.0f} ± {:.0f}", throughput[id].mean(), throughput[id].sd()),
                          ratio(throughput[id], throughput["pre"]).show()});
    curves.series.push_back(loss_series(a.label, find_run(runs, seed_id(a.id, o.seeds.front()))));
  }
  r.tables = {speed, eq, outcome_table("Runs", runs)};
  r.charts.push_back(curves);

  r.claims = {
      claim_within("A1", "Pre-RMSNorm, trained from its own init, reaches Pre-LN's validation loss",
                   "final validation loss, Pre-RMSNorm − Pre-LN (nats)", gap("pre_rms"), -kSameLoss, kSameLoss),
      claim_within("A2", "Pre-CRMSNorm, trained from its own init, reaches Pre-LN's validation loss",
                   "final validation loss, Pre-CRMSNorm − Pre-LN (nats)", gap("pre_crms"), -kSameLoss, kSameLoss),
      claim_above("B1", "Pre-RMSNorm trains faster than Pre-LN", "tokens/s, Pre-RMSNorm ÷ Pre-LN (each run alone)",
                  ratio(throughput["pre_rms"], throughput["pre"]), 1.0),
      claim_above("B2", "Pre-CRMSNorm trains faster than Pre-LN", "tokens/s, Pre-CRMSNorm ÷ Pre-LN (each run alone)",
                  ratio(throughput["pre_crms"], throughput["pre"]), 1.0),
  };
  r.evidence = {
      fmt::format("final validation loss: Pre-LN {}, Pre-RMSNorm {}, Pre-CRMSNorm {}; tokens/s: {}, {}, {}",
                  val["pre"].show(), val["pre_rms"].show(), val["pre_crms"].show(), throughput["pre"].show(),
                  throughput["pre_rms"].show(), throughput["pre_crms"].show()),
      fmt::format("Check (not in the verdict): the trained Pre-LN converted to Pre-RMSNorm differs in its logits by {} "
                  "(fp32) / {} "
                  "(fp64), in its gradients by {} / {}; to Pre-CRMSNorm by {} / {} — {}",
                  eq.rows[0][2], eq.rows[2][2], eq.rows[0][4], eq.rows[2][4], eq.rows[1][2], eq.rows[3][2],
                  converts ? "equal within rounding" : "NOT equal: the converter or a norm is wrong"),
  };
  r.verdict_rule = fmt::format(
      "A1, A2: Pre-RMSNorm and Pre-CRMSNorm, each trained from its own init, end within ±{:g} nats of Pre-LN's final "
      "validation loss (the difference per seed; an equivalence test: the whole interval inside the band); B1, B2: "
      "each RMS form trains more tokens per second than Pre-LN (ratio per seed: the runs of one seed are one round, "
      "timed alone and alternated). The converter check (logits ≤ {:g} in fp32 and ≤ {:g} in fp64 relative to "
      "their scale) is shown, not judged: it holds by construction unless the code is wrong.",
      kSameLoss, kConvertedFp32, kConvertedFp64);
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
    .paper_setting =
        "Jiang et al. 2023 §3–5: an exact identity for any Pre-LN Transformer (no regime needed for the equality); "
        "training and inference timed on GPT and ViT models, 1%–10% faster.",
    .cost = "default ~3 min on 2 cores (3 seeds, every run alone), --quick ~15 s",
    .large = "model.n_layers=12 train.steps=1000",
    .plan = plan,
    .judge = judge,
};

}  // namespace normlab::study
