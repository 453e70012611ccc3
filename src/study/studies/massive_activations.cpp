// Peri-LN (Kim et al. 2025, §3–4): in Pre-LN nothing bounds what a branch adds to the stream, so a few
// hidden-state coordinates grow very large during training ("massive activations"), most in the
// deep layers; normalizing each branch's output as well (Peri-LN) keeps them bounded.
#include <algorithm>
#include <cmath>
#include <map>

#include "probe/records.h"
#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// The preset as --set leaves it (model.n_layers, train.steps; the probe interval scales with the steps).
TrainPreset preset(const StudyOptions& o) {
  return configured(o, o.quick ? TrainPreset{4, 30, 10} : TrainPreset{12, 500, 50});
}

constexpr Arm kArms[] = {{"pre", "Pre-LN"}, {"peri", "Peri-LN"}};

std::vector<RunRequest> plan(const StudyOptions& o) {
  const TrainPreset p = preset(o);
  return placement_runs(o.seeds, kArms, p, p.steps / 10);
}

// max|x| of the stream entering each layer (and leaving the stack), at every probe step.
std::vector<Json> streams(const std::vector<RunOutcome>& runs, const std::string& placement, int seed) {
  const RunOutcome* run = find_run(runs, seed_id(placement, seed));
  return run ? probe_records(run->dir / "run", probe::family::stream) : std::vector<Json>{};
}
// The largest max|x| over layers (NaN if the record lacks them or one is NaN).
double largest(const Json& stream) {
  const auto v = numbers(stream, probe::field::max_abs);
  if (v.empty() || std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) return NAN;
  return *std::max_element(v.begin(), v.end());
}

// ---- The pre-registration: max|x| of the stream after each layer, per seed ----------------------------------------

Term stream_field(const char* arm, const char* field, const char* over, bool relative = false) {
  return {arm,
          "probe",
          {{"family", probe::family::stream},
           {"field", field},
           {"over", over},
           {"relative_to", relative ? "first_probe" : "nothing"}}};
}
Term max_abs(const char* arm, const char* over, bool relative = false) {
  return stream_field(arm, probe::field::max_abs, over, relative);
}
const Term kPreGrowth = max_abs("pre", "max", true), kPeriGrowth = max_abs("peri", "max", true);

const std::vector<ClaimSpec> kSubClaims = {
    {.id = "A",
     .statement = "Pre-LN's largest hidden-state magnitudes grow during training",
     .quote = "Pre-LN is prone to \"massive activations\" (abstract); its hidden states pass the fp16 maximum within "
              "about 0.5B tokens",
     .where = "Kim et al. 2025, abstract and §4",
     .of = kPreGrowth,
     .threshold = 2},
    {.id = "B",
     .statement = "Most in the deep layers",
     .where = "Kim et al. 2025, §4",
     .of = max_abs("pre", "mean_second_half"),
     .against = max_abs("pre", "mean_first_half"),
     .compare = Compare::difference,
     .threshold = 0.0},
    {.id = "C",
     .statement = "Peri-LN keeps them bounded",
     .quote = "Peri-LN gives more balanced variance growth, steadier gradients and more stable convergence",
     .where = "Kim et al. 2025, abstract",
     .of = kPeriGrowth,
     .against = kPreGrowth,
     .compare = Compare::ratio,
     .side = SubClaim::Side::below,
     .threshold = 0.5},
    // A's growth is the whole stream's (from GPT-2's small init every entry grows); a massive activation in Sun et
    // al.'s sense is an outlier against the typical entry, so D asks the largest |x| to outgrow the largest RMS.
    {.id = "D",
     .statement = "Pre-LN's largest |x| becomes an outlier: it outgrows the stream's RMS by at least 1.5× in training",
     .quote = "very few activations exhibit significantly larger values than others (e.g., 100,000 times larger)",
     .where = "Sun, Chen, Kolter, Liu 2024, Massive Activations in Large Language Models, abstract",
     .of = kPreGrowth,
     .against = stream_field("pre", probe::field::rms, "max", true),
     .compare = Compare::ratio,
     .threshold = 1.5},
};

// ---- The report's evidence and charts ------------------------------------------------------------------------------

// Peri-LN's stream is a sum of normalized branch outputs, so its level starts higher: growth, not level, is compared.
Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  Report r;
  r.setup =
      "max|x| of the residual stream entering each layer (probe batch = the step's batch) every train.probe_every "
      "steps.";
  Chart profile{"max |x| of the stream by layer at the end of training (first seed)", "layer (L = the stack's output)",
                "max |x|"};
  profile.log_y = true;
  Chart over_time{"largest max |x| over layers during training (first seed)", "step", "max |x|"};
  over_time.log_y = true;
  Table table{"Stream magnitudes",
              {"placement", "largest max|x| at step 1 (first seed)", "at the last probe (seeds)", "growth",
               "mean max|x| first half of layers", "second half", "val loss"}};
  const auto values = [&](const Term& t) { return measure_term(t, Json::object(), runs, o.seeds); };
  for (const Arm& a : kArms) {
    const std::vector<Json> s1 = streams(runs, a.id, o.seeds.front());
    if (!s1.empty()) profile.series.push_back(layer_series(a.label, s1.back(), probe::field::max_abs));
    Series t{a.label, {}, {}};
    for (const Json& j : s1) t.x.push_back(number(j, probe::field::step)), t.y.push_back(largest(j));
    over_time.series.push_back(t);
    table.rows.push_back({a.label, num(s1.empty() ? NAN : largest(s1.front())), values(max_abs(a.id, "max")).show(),
                          values(max_abs(a.id, "max", true)).show(), values(max_abs(a.id, "mean_first_half")).show(),
                          values(max_abs(a.id, "mean_second_half")).show(), val_losses(runs, a.id, o.seeds).show()});
  }
  r.charts = {profile, over_time};
  r.tables = {table, outcome_table("Runs", runs)};
  r.evidence = {fmt::format("growth of the largest max|x|: Pre-LN {}, Peri-LN {}", values(kPreGrowth).show(),
                            values(kPeriGrowth).show())};
  r.verdict_rule =
      "Peri-LN's stream is a sum of normalized branch outputs, so its level starts higher: growth, not "
      "level, is compared.";
  return r;
}

}  // namespace

extern const Study kMassiveActivations{
    .name = "massive-activations",
    .title = "Largest |activation| by layer over training: Pre-LN vs Peri-LN",
    .claim =
        "In Pre-LN the largest hidden-state magnitudes grow during training, most in the deep layers; Peri-LN, which "
        "also "
        "normalizes each branch's output, keeps them bounded.",
    .source =
        "Kim et al. 2025, Peri-LN: Revisiting Normalization Layer in the Transformer Architecture (arXiv 2502.02732), "
        "§3–4.",
    .paper_setting =
        "Peri-LN abstract: experiments on Transformers up to 3.2B parameters, where Pre-LN and Post-LN are prone to "
        "vanishing gradients and massive activations. According to a secondary summary not confirmed in the paper's "
        "text: decoders of 400M, 1.5B and 3.2B on 30B "
        "DCLM tokens over 5 seeds, Pre-LN's hidden states passing the fp16 maximum within about 0.5B tokens.",
    .cost = "default ~3.5 min on 2 cores (5 seeds), --quick ~10 s",
    .large = "model.n_layers=24 train.steps=2000",
    .plan = plan,
    .arms = {{"pre", "Pre-LN"}, {"peri", "Peri-LN"}},
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
