// Jiang et al. 2023 (NeurIPS), "Pre-RMSNorm and Pre-CRMSNorm Transformers": a Pre-LN Transformer is
// arithmetically equivalent to a Pre-RMSNorm one whose branches and embeddings are re-centred (same
// weights), and to a Pre-CRMSNorm one on a stream one coordinate narrower (converted weights), in training and
// inference, and the RMS forms are cheaper. Here the three are trained from one function (Pre-RMSNorm's own draws are
// Pre-LN's; Pre-CRMSNorm starts from Pre-LN's init converted) and timed training the same budget; the trained Pre-LN
// is also converted and compared (`normlab probe --analysis norm-equivalence`), a check of the converter only.
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
      // Pre-CRMSNorm starts from Pre-LN's own init, converted: the same function, so A2 asks whether training keeps
      // them equal (its weights live on a stream one coordinate narrower, so Adam's steps differ). Pre-RMSNorm's own
      // init already is Pre-LN's (the same draws, centred at run time).
      if (a.id == std::string("pre_crms")) config["model"]["init"]["from_pre_ln"] = true;
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

// ---- The pre-registration ------------------------------------------------------------------------------------------

const std::string kEquivalent =
    "We formally establish the equivalence of Pre-LN, Pre-RMSNorm, and Pre-CRMSNorm Transformer variants in both "
    "training and inference.";
const std::string kFaster =
    "Experiments demonstrate that we can reduce the training and inference time of Pre-LN Transformers by 1% - 10%.";

// A form trained beside Pre-LN ends within ±kSameLoss of its final validation loss, seed by seed.
ClaimSpec same_loss(std::string id, std::string statement, const std::string& arm) {
  return {.id = std::move(id),
          .statement = std::move(statement),
          .quote = kEquivalent,
          .where = "Jiang et al. 2023, abstract and §3",
          .of = {arm, "final_val_loss"},
          .against = Term{"pre", "final_val_loss"},
          .compare = Compare::difference,
          .side = SubClaim::Side::within,
          .threshold = {-kSameLoss, kSameLoss}};
}
// A form trains more tokens per second than Pre-LN: the runs of one seed are one round, timed alone and alternated.
ClaimSpec faster(std::string id, std::string statement, const std::string& arm) {
  return {.id = std::move(id),
          .statement = std::move(statement),
          .quote = kFaster,
          .where = "Jiang et al. 2023, abstract and §5",
          .of = {arm, "tokens_per_second"},
          .against = Term{"pre", "tokens_per_second"},
          .compare = Compare::ratio,
          .threshold = 1.0};
}

const std::vector<ClaimSpec> kSubClaims = {
    same_loss("A1", "Pre-RMSNorm, trained from its own init, reaches Pre-LN's validation loss", "pre_rms"),
    same_loss("A2", "Pre-CRMSNorm, started from Pre-LN's init converted, reaches Pre-LN's validation loss", "pre_crms"),
    faster("B1", "Pre-RMSNorm trains faster than Pre-LN", "pre_rms"),
    faster("B2", "Pre-CRMSNorm trains faster than Pre-LN", "pre_crms"),
};

// ---- The report's evidence and tables
// --------------------------------------------------------------------------------

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
    throughput[a.id] = measure_term({a.id, "tokens_per_second"}, Json::object(), runs, o.seeds);
    val[a.id] = measure_term({a.id, "final_val_loss"}, Json::object(), runs, o.seeds);
  }
  for (const Arm& a : kArms) {
    const std::string id = a.id;
    speed.rows.push_back({a.label, val[id].show(), id == "pre" ? "0" : difference(val[id], val["pre"]).show(),
                          fmt::format("{:.0f} ± {:.0f}", throughput[id].mean(), throughput[id].sd()),
                          ratio(throughput[id], throughput["pre"]).show()});
    curves.series.push_back(loss_series(a.label, find_run(runs, seed_id(a.id, o.seeds.front()))));
  }
  r.tables = {speed, eq, outcome_table("Runs", runs)};
  r.charts.push_back(curves);
  r.evidence = {
      fmt::format("final validation loss: Pre-LN {}, Pre-RMSNorm {}, Pre-CRMSNorm {}; tokens/s: {}, {}, {}",
                  val["pre"].show(), val["pre_rms"].show(), val["pre_crms"].show(), throughput["pre"].show(),
                  throughput["pre_rms"].show(), throughput["pre_crms"].show()),
      fmt::format("Check (not in the verdict): the trained Pre-LN converted to Pre-RMSNorm differs in its logits by {} "
                  "(fp32) / {} (fp64), in its gradients by {} / {}; to Pre-CRMSNorm by {} / {} — {}",
                  eq.rows[0][2], eq.rows[2][2], eq.rows[0][4], eq.rows[2][4], eq.rows[1][2], eq.rows[3][2],
                  converts ? "equal within rounding" : "NOT equal: the converter or a norm is wrong"),
  };
  r.verdict_rule = fmt::format(
      "A1, A2 are equivalence tests: the whole interval inside the band. The converter check (logits ≤ {:g} in fp32 "
      "and ≤ {:g} in fp64 relative to their scale) is shown, not judged: it holds by construction unless the code is "
      "wrong.",
      kConvertedFp32, kConvertedFp64);
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
    .arms = {{"pre", "Pre-LN"}, {"pre_rms", "Pre-RMSNorm"}, {"pre_crms", "Pre-CRMSNorm"}},
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
