// Wang et al. 2022 (DeepNet) §3, Fig. 4 (18L-18L Post-LN, with and without warm-up; no DeepNorm): early in
// training, Post-LN's model update ‖F(x,θ_t) − F(x,θ_0)‖ jumps (the update is too large at the start), and the
// inputs of its LayerNorms grow, which later shrinks the gradient through them; warm-up damps the jump. §4.2,
// Fig. 5 (64-128-2 tiny Transformers, 6L-6L to 100L-100L): DeepNorm keeps the update small.
#include <algorithm>
#include <cmath>
#include <map>

#include "probe/records.h"
#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

struct Preset {
  int layers, steps, warmup, probe_every;
};
// The preset's sizes as --set leaves them: the warm-up and probe interval scale with train.steps.
Preset preset(const StudyOptions& o) {
  const Preset p = o.quick ? Preset{6, 30, 10, 3} : Preset{12, 200, 60, 5};
  const TrainPreset t = configured(o, TrainPreset{p.layers, p.steps, p.probe_every});
  return {t.layers, t.steps, scaled(p.warmup, p.steps, t.steps), t.probe_every};
}

struct Variant {
  const char* id;
  const char* placement;
  bool warmup;
  const char* label;
};
constexpr Variant kArms[] = {{"post-w0", "post", false, "Post-LN, no warm-up"},
                             {"post-warm", "post", true, "Post-LN, warm-up"},
                             {"deepnorm-w0", "deepnorm", false, "DeepNorm, no warm-up"}};

std::vector<RunRequest> plan(const StudyOptions& o) {
  const Preset p = preset(o);
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (const Variant& a : kArms) {
      Json config =
          small_lm(a.placement, p.layers, p.steps, static_cast<uint64_t>(seed), a.warmup ? p.warmup : 0, p.probe_every);
      use_xavier(config);
      runs.push_back({seed_id(a.id, seed), config, "train", ""});
    }
  return runs;
}

// Per probe step: ‖ΔF‖ (RMS over logits) and the mean ‖x‖/√d entering the post-residual norms.
struct Trace {
  std::vector<double> step, update, ln_input;
};
Trace trace(const RunOutcome* run) {
  Trace t;
  if (!run) return t;
  for (Json& j : probe_records(run->dir / "run", probe::family::model_update)) {
    t.step.push_back(number(j, probe::field::step));
    t.update.push_back(number(j, probe::field::logit_change_rms));
  }
  for (Json& j : probe_records(run->dir / "run", probe::family::norm)) {
    const std::vector<double> rms = numbers(j, probe::field::input_rms);
    std::vector<double> inputs;
    for (size_t i = 0; i < rms.size(); ++i)
      if (j["name"][i].is_string() && j["name"][i].get<std::string>().find("post_norm") != std::string::npos)
        inputs.push_back(rms[i]);
    t.ln_input.push_back(mean(inputs));
  }
  return t;
}

// ---- The pre-registration ------------------------------------------------------------------------------------------

Json variables(const StudyOptions& o) { return {{"warmup", preset(o).warmup}}; }

const std::vector<ArmSpec> kClaimArms = {{"post-w0", "Post-LN, no warm-up"},
                                         {"post-warm", "Post-LN with {warmup} warm-up steps"},
                                         {"deepnorm-w0", "DeepNorm, no warm-up"}};

// ‖F(x,θ_t) − F(x,θ_0)‖, the RMS over the logits of the first validation batch, at a probe.
Term update(std::string arm, const char* step) {
  return {std::move(arm), "probe", {{"family", "model_update"}, {"field", "logit_change_rms"}, {"step", step}}};
}

// The mean ‖x‖/√d entering the post-residual norms at the last probe ÷ at the first.
Term norm_input_growth(std::string arm) {
  return {std::move(arm),
          "probe",
          {{"family", "norm"},
           {"field", "input_rms"},
           {"names", "post_norm"},
           {"over", "mean"},
           {"relative_to", "first_probe"}}};
}

const std::vector<ClaimSpec> kSubClaims = {
    // The update of the first step, as DeepNet's Fig. 5 compares the early updates step by step; the largest
    // displacement over the first steps would measure learning (DeepNorm learns while Post-LN stalls) more than the
    // size of an update.
    {.id = "A",
     .statement = "Post-LN's first model update is larger than DeepNorm's",
     .quote =
         "Figure 5 shows that the model update of DEEPNET is nearly constant, while the model update of Post-LN is "
         "exploding.",
     .where = "Wang et al. 2022, DeepNet §4.2, Fig. 5 (64-128-2 tiny Transformers, early training)",
     .of = update("post-w0", "first"),
     .against = update("deepnorm-w0", "first"),
     .compare = Compare::ratio,
     .threshold = 1.5},
    {.id = "B",
     .statement = "Post-LN's LayerNorm inputs grow during training",
     .quote = "When the update explodes, the inputs to LN become large (see Figure 4(b) and Figure 4(c)).",
     .where = "Wang et al. 2022, DeepNet §3, Fig. 4(b, c)",
     .of = norm_input_growth("post-w0"),
     .threshold = 1.5},
    {.id = "C",
     .statement = "Warm-up damps Post-LN's early update",
     .quote = "Both warm-up and better initialization help alleviate this issue, enabling the model to update "
              "smoothly.",
     .where = "Wang et al. 2022, DeepNet §3, Fig. 4(a)",
     .of = update("post-warm", "largest_in_first_quarter"),
     .against = update("post-w0", "largest_in_first_quarter"),
     .compare = Compare::difference,
     .side = SubClaim::Side::below,
     .threshold = 0.0},
};

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  Report r;
  r.setup = "Xavier init with unit-variance embeddings; ‖ΔF‖ is the RMS over the logits of the first validation batch.";
  Chart update_chart{"model update ‖F(x,θ_t) − F(x,θ_0)‖ (RMS over logits)", "step", "‖ΔF‖"};
  Chart inputs{"post-residual LayerNorm input size ‖x‖/√d (mean over norms)", "step", "‖x‖/√d"};
  for (const ArmSpec& a : kClaimArms) {
    const Trace shown = trace(find_run(runs, seed_id(a.id, o.seeds.front())));
    const std::string label = fmt::format("{} (seed {})", fill(a.label, variables(o), "arm"), o.seeds.front());
    update_chart.series.push_back({label, shown.step, shown.update});
    inputs.series.push_back({label, shown.step, shown.ln_input});
  }
  r.charts = {update_chart, inputs};
  r.tables.push_back(outcome_table("Runs", runs));
  const auto values = [&](const Term& t) { return measure_term(t, variables(o), runs, o.seeds).show(); };
  r.evidence = {
      fmt::format("‖ΔF‖ after step 1: Post-LN {}, DeepNorm {}; largest ‖ΔF‖ in the first quarter of training: Post-LN "
                  "{}, with warm-up {}, DeepNorm {}",
                  values(update("post-w0", "first")), values(update("deepnorm-w0", "first")),
                  values(update("post-w0", "largest_in_first_quarter")),
                  values(update("post-warm", "largest_in_first_quarter")),
                  values(update("deepnorm-w0", "largest_in_first_quarter"))),
      fmt::format("LayerNorm input size, last probe ÷ first: Post-LN {}, DeepNorm {}",
                  values(norm_input_growth("post-w0")), values(norm_input_growth("deepnorm-w0")))};
  return r;
}

}  // namespace

extern const Study kModelUpdate{
    .name = "model-update",
    .title = "Early-training model update and LayerNorm input size",
    .claim =
        "Post-LN's model update ‖F(θ_t) − F(θ_0)‖ jumps early in training and its LayerNorm inputs grow; warm-up damps "
        "the jump, and DeepNorm's update stays smaller.",
    .source =
        "Wang et al. 2022, DeepNet: Scaling Transformers to 1,000 Layers (arXiv 2203.00555), §3, Fig. 4; §4.2, "
        "Fig. 5.",
    .paper_setting =
        "DeepNet §3, Fig. 4: 18L-18L encoder-decoders on IWSLT-14 De-En (d 512), Post-LN with and without a 4k "
        "warm-up and Post-LN-init (no DeepNorm): ‖F(x, θ_t) − F(x, θ_0)‖ over the first updates jumps at the start "
        "without warm-up, and the LN inputs grow far past √d. §4.2, Fig. 5: vanilla Post-LN against DeepNet on "
        "64-128-2 tiny Transformers (read as d 64, FFN 128, 2 heads) of 6L-6L to 100L-100L early in training: "
        "DeepNet's update is much smaller and more stable.",
    .cost = "default ~2 min on 2 cores (5 seeds), --quick ~20 s",
    .large = "model.n_layers=24 train.steps=1000",
    .plan = plan,
    .arms = kClaimArms,
    .variables = variables,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
