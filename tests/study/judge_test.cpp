// Every study's judge on synthetic runs of its quick plan with the study's default seeds (3): numbers
// under which each sub-claim holds on every seed give "reproduced", numbers under which each fails on
// every seed give "not reproduced", seeds that disagree give "inconclusive", and a run that failed or a
// number that is missing gives "incomplete". A comparison turned the wrong way, or a sub-claim that
// cannot fail, breaks one of the first two. The decision rule itself (kit.h) is tested at the end.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "common/error.h"
#include "study/kit.h"
#include "study/synthetic_runs.h"

namespace normlab::study {
namespace {

using namespace testing;
using train::testing::TempDir;

using Runs = std::vector<RunOutcome>;
// Whether a seed's runs are written so that each sub-claim holds (true) or each fails (false).
using Holds = std::function<bool(int seed)>;
// Writes every run's files, seed by seed as `holds` says.
using Writer = std::function<void(Runs&, const Holds&)>;

int seed_of(const RunOutcome& o) { return o.config["train"]["seed"].get<int>(); }
// The run id without its "-s<seed>" suffix.
std::string arm_of(const RunOutcome& o) { return o.request.id.substr(0, o.request.id.rfind("-s")); }
// A small seed-to-seed spread (±1%), so the rule sees a nonzero sd.
double jitter(const RunOutcome& o) { return 1 + 0.01 * (seed_of(o) - 2); }

std::vector<double> ramp(size_t n, double first, double last) {
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i) v.push_back(n == 1 ? first : first + (last - first) * double(i) / double(n - 1));
  return v;
}

// grad-init's columns: the fc2 weight of every layer, with the given norms (appended to `out`, the layers named
// under `stack`: "encoder." / "decoder." in an encoder-decoder).
Json fc2_grads(const std::vector<double>& norms, const std::string& stack = "",
               Json out = Json{{"name", Json::array()}, {"grad_norm", Json::array()}}) {
  for (size_t l = 0; l < norms.size(); ++l) {
    out["name"].push_back(fmt::format("{}layers.{}.attn.qkv.weight", stack, l)), out["grad_norm"].push_back(99.0);
    out["name"].push_back(fmt::format("{}layers.{}.ffn.fc2.weight", stack, l)), out["grad_norm"].push_back(norms[l]);
  }
  return out;
}

int layers_of(const RunOutcome& o) { return o.config["model"]["n_layers"].get<int>(); }

void why_pre_ln(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    const std::string& id = o.request.id;
    const int L = layers_of(o);
    if (id.starts_with("init-")) {  // A: Post-LN's last-layer gradient flat in depth, Pre-LN's shrinking
      const bool post = id.starts_with("init-post");
      const double last = post ? (holds ? 1.0 : L / 2.0) : (holds ? std::sqrt(2.0 / L) : 1.0);
      write_analysis(o, "grad-init", fc2_grads(ramp(size_t(L), 0.5, last)));
    } else if (arm == "train-post-L6-w0") {  // B: stalls without warm-up where Pre-LN trains
      holds ? write_stalled(o) : write_trained(o, 4.0);
    } else {
      write_trained(o, arm == "train-post-L6-w30" ? 4.5 : 4.0);
    }
    if (id.starts_with("train-")) {  // C: Pre-LN's stream grows with depth
      const bool grows = holds && arm == "train-pre-L6-w0";
      write_probe(
          o, 60, "stream",
          per_layer("mean_square", grows ? ramp(size_t(L) + 1, 1, 6) : std::vector<double>(size_t(L) + 1, 1.0)));
    }
  }
}

void grad_by_depth(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const int L = layers_of(o);
    const bool post = o.request.id.find("-post-") != std::string::npos;
    // Post-LN: last layer 1 at every depth and twice the first (A, C); Pre-LN: last layer √(2/L) (B).
    std::vector<double> norms = post ? (holds ? ramp(size_t(L), 0.5, 1.0) : std::vector<double>(size_t(L), L / 2.0))
                                     : std::vector<double>(size_t(L), holds ? std::sqrt(2.0 / L) : 1.0);
    write_analysis(o, "grad-init", fc2_grads(norms));
  }
}

void stream_at_init(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    const int L = layers_of(o);
    std::vector<double> ms;
    for (int l = 0; l <= L; ++l) ms.push_back(arm == "post" ? 1.0 : 1.0 + (holds ? 1.0 : 0.2) * l);
    write_analysis(o, "stream-init", per_layer("mean_square", ms));
  }
}

void warmup_grid(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    // A, B: deep Post-LN stalls without warm-up and trains with it; C: the rest train (one Pre-LN
    // cell stalls when failing); D: shallow Post-LN trains without warm-up.
    const bool stalls =
        holds ? arm == "post-L6-lr0.001-w0" : arm == "post-L2-lr0.001-w0" || arm == "pre-L6-lr0.001-w10";
    stalls ? write_stalled(o) : write_trained(o);
  }
}

void bert_warmup(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    // A: Post-LN without warm-up ends above Post-LN with it (here it stalls); B: Pre-LN without warm-up trains;
    // C: and ends below the warmed-up Post-LN. Failing: warm-up does not help Post-LN, Pre-LN stalls cold.
    if (arm == "post-lr0.003-w0") holds ? write_stalled(o) : write_trained(o, 4.0, 4.0 * jitter(o));
    else if (arm == "pre-lr0.003-w0") holds ? write_trained(o, 4.0, 4.0 * jitter(o)) : write_stalled(o);
    else write_trained(o, 4.5, 4.5 * jitter(o));
  }
}

void mt_depth(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    const bool cold = arm.ends_with("-w0"), deep = arm.find("-L2-") != std::string::npos;
    // A: deep Post-LN without warm-up diverges (val loss ∞) and translates with it; B: the others learn cold; C:
    // DeepNorm and Admin below Pre-LN's val loss at depth. Failing: warm-up costs Post-LN, the others stall cold and
    // trail Pre-LN.
    if (arm.starts_with("post-")) {
      if (deep && cold && holds) write_diverged(o);
      else write_translation(o, (deep && cold ? 12.0 : 10.0) * jitter(o));
    } else if (cold && !holds) {
      write_translation(o, 1.0, true);
    } else {
      const bool better = !arm.starts_with("pre-");
      write_translation(o, (better == holds ? 12.0 : 8.0) * jitter(o));
    }
  }
}

void model_update(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    const int every = o.config["train"]["probe_every"].get<int>(), steps = o.config["train"]["steps"].get<int>();
    // A: Post-LN's early update > 1.5× DeepNorm's; C: warm-up damps it; B: Post-LN's norm inputs grow.
    const double update = arm == "post-w0" ? (holds ? 3.0 : 1.0) : arm == "post-warm" ? (holds ? 1.0 : 2.0) : 1.0;
    for (int step = 1; step <= steps; step = step == 1 ? every : step + every) {
      const double input = arm == "post-w0" && holds ? 1.0 + double(step) / steps : 1.0;
      write_probe(o, step, "model_update", {{"logit_change_rms", update}});
      write_probe(o, step, "norm",
                  {{"name", {"layers.0.attn.post_norm", "layers.0.ffn.post_norm"}},
                   {"inv_sigma", {1.0, 1.0}},
                   {"input_rms", {input, input}}});
    }
    write_trained(o);
  }
}

void one_step(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const double n = 2.0 * layers_of(o);
    const bool post = o.request.id.starts_with("post-");
    // ‖ΔF‖² ∝ N^slope: Post-LN 1, the others 0 (holds); Post-LN 0, the others 2 (fails).
    const double slope = post ? (holds ? 1.0 : 0.0) : (holds ? 0.0 : 2.0);
    write_analysis(o, "one-step", {{"lr", 1e-5}, {"output_change_rms", std::sqrt(0.01 * std::pow(n, slope))}});
  }
}

void depth_variance(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const size_t n = size_t(layers_of(o)) + 1;
    const bool pre = o.request.id.starts_with("pre");
    // A, B: the Pre-LN stream grows 4× from layer 1 to the top; C, D: the others stay at a quarter of it.
    std::vector<double> ms =
        pre ? (holds ? ramp(n, 1, 4) : ramp(n, 1, 1.5)) : std::vector<double>(n, holds ? 1.0 : 1.5);
    ms[0] = ms[1] = 1.0;
    write_probe(o, 1, "stream", per_layer("mean_square", std::vector<double>(n, 1.0)));
    write_probe(o, 30, "stream", per_layer("mean_square", ms));
    if (o.request.id.starts_with("gpas")) write_probe(o, 30, "scalar", {{"name", {"layers.0.gpas"}}, {"value", {0.5}}});
    write_trained(o);
  }
}

void layer_importance(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    const std::vector<double> early_heavy = {1, 1, 0.1, 0.1}, late_heavy = {0.1, 0.1, 1, 1},
                              even = {0.5, 0.5, 0.5, 0.5};
    // A, B: Pre-LN's deep layers turn and matter less; C: Post-LN's early ones matter less; D: LNS's
    // deep layers carry a larger share than Pre-LN's.
    const auto& angle = arm == "pre" ? (holds ? early_heavy : late_heavy) : even;
    const auto& drop = arm == "pre"    ? (holds ? early_heavy : late_heavy)
                       : arm == "post" ? (holds ? late_heavy : early_heavy)
                                       : even;
    write_analysis(o, "angular", per_layer("angular_distance", angle));
    write_analysis(o, "layer-drop", per_layer("delta_loss", drop));
    write_trained(o);
  }
}

void grad_balance(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const bool pre = o.request.id.starts_with("pre-");
    // A: Pre-LN's first layer gets 4× its last layer's gradient; B–D: the others are flat.
    const std::vector<double> grads = pre ? (holds ? ramp(4, 4, 1) : std::vector<double>{1, 1, 1, 1.2})
                                          : (holds ? std::vector<double>{1, 1, 1, 1} : ramp(4, 4, 1));
    for (int step : {1, 10, 20, 30}) {
      Json param{{"name", Json::array()}, {"weight_norm", Json::array()}, {"grad_norm", Json::array()}};
      param["name"].push_back("embed.weight"), param["weight_norm"].push_back(1.0), param["grad_norm"].push_back(50.0);
      for (size_t l = 0; l < grads.size(); ++l)
        for (const char* p : {"attn.qkv.weight", "ffn.fc1.weight"}) {
          param["name"].push_back(fmt::format("layers.{}.{}", l, p));
          param["weight_norm"].push_back(1.0), param["grad_norm"].push_back(grads[l] / std::sqrt(2.0));
        }
      write_probe(o, step, "param", param);
    }
    write_trained(o);
  }
}

void rms_equivalence(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    // A: the RMS forms end within 0.05 nats of Pre-LN; B: they train faster (fewer seconds).
    const double val = arm == "pre" ? 4.0 : holds ? 4.02 : 4.5, seconds = arm == "pre" ? 10 : holds ? 8 : 12;
    write_trained(o, val - 0.1, val, seconds * jitter(o));
    if (arm == "pre")
      write_analysis(o, "norm-equivalence",
                     {{"precision", {"fp32", "fp32", "fp64", "fp64"}},
                      {"variant", {"pre_rms", "pre_crms", "pre_rms", "pre_crms"}},
                      {"logits_max_error", {1e-7, 1e-7, 1e-15, 1e-15}},
                      {"loss_error", {1e-7, 1e-7, 1e-15, 1e-15}},
                      {"grad_max_rel_error", {1e-6, NAN, 1e-14, NAN}}});
  }
}

void massive_activations(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const bool pre = o.request.id.starts_with("pre-");
    // A: Pre-LN's largest |x| grows 10×, B: most in the deep layers; C: Peri-LN's grows 2× (fails: 3×
    // against Pre-LN's 1.5×, and Pre-LN's deep layers no larger).
    const std::vector<double> last =
        pre ? (holds ? std::vector<double>{1, 2, 2, 10, 10} : std::vector<double>{1, 1.5, 1.5, 1, 1})
            : std::vector<double>(5, holds ? 2.0 : 3.0);
    write_probe(o, 1, "stream", per_layer("max_abs", std::vector<double>(5, 1.0)));
    write_probe(o, 10, "stream", per_layer("max_abs", std::vector<double>(5, 1.2)));
    write_probe(o, 30, "stream", per_layer("max_abs", last));
    write_trained(o);
  }
}

void dyt_alpha(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    // A: the best α₀ within 0.1 nats of LayerNorm; B: the worst α₀ > 0.1 above the best.
    const double val = arm == "layernorm"  ? 4.0
                       : arm == "dyt-a0.5" ? (holds ? 4.05 : 4.5)
                       : arm == "dyt-a2"   ? (holds ? 4.5 : 4.55)
                                           : 5.0;
    write_trained(o, val - 0.1, val);
  }
}

void leaderboard(Runs& runs, const Holds& holds_for) {
  for (RunOutcome& o : runs) {
    const bool holds = holds_for(seed_of(o));
    const std::string arm = arm_of(o);
    // A: every placement trains (fails: ReZero stalls); B: Pre-LN ends below Post-LN.
    if (!holds && arm == "rezero") write_stalled(o);
    else
      write_trained(o, 4.0,
                    (arm == "pre"    ? (holds ? 4.0 : 4.3)
                     : arm == "post" ? (holds ? 4.2 : 4.1)
                                     : 4.1) *
                        jitter(o));
  }
}

struct JudgeCase {
  std::string study;
  Writer write;
  std::string key_run;  // a run every verdict needs
};

void PrintTo(const JudgeCase& c, std::ostream* os) { *os << c.study; }

const std::vector<JudgeCase>& judge_cases() {
  static const std::vector<JudgeCase> cases = {
      {"why-pre-ln", why_pre_ln, "init-post-L6-s1"},
      {"grad-by-depth", grad_by_depth, "xavier-post-L8-s1"},
      {"stream-at-init", stream_at_init, "pre-s1"},
      {"warmup-grid", warmup_grid, "post-L2-lr0.001-w0-s1"},
      {"model-update", model_update, "post-w0-s1"},
      {"one-step", one_step, "post-L4-s1"},
      {"depth-variance", depth_variance, "lns-s1"},
      {"layer-importance", layer_importance, "post-s1"},
      {"grad-balance", grad_balance, "mixln-s1"},
      {"rms-equivalence", rms_equivalence, "pre_crms-s1"},
      {"massive-activations", massive_activations, "peri-s1"},
      {"dyt-alpha", dyt_alpha, "dyt-a2-s1"},
      {"leaderboard", leaderboard, "pre-s1"},
      {"bert-warmup", bert_warmup, "post-lr0.003-w0-s1"},
      {"mt-depth", mt_depth, "post-L2-w10-s1"},  // (the cold one diverges: ∞ loss without files)
  };
  return cases;
}

class StudyJudge : public ::testing::TestWithParam<JudgeCase> {
 protected:
  // The quick plan's runs, with the study's default seeds (1..default_seeds, at least 2), and files
  // written by the case's writer: each seed's runs as holds(seed) says.
  Runs synthetic(const Holds& holds, const std::string& name) {
    const Study& study = find_study(GetParam().study);
    options_.quick = true;
    options_.dir = tmp_.path() / name;
    options_.seeds.clear();
    for (int seed = 1; seed <= study.default_seeds; ++seed) options_.seeds.push_back(seed);
    Runs runs = planned_runs(study, options_);
    GetParam().write(runs, holds);
    for (const RunOutcome& o : runs) write_status(o);
    return runs;
  }
  Runs synthetic(bool holds) {
    return synthetic([holds](int) { return holds; }, holds ? "holds" : "fails");
  }
  Report judge(const Runs& runs) { return judge_study(find_study(GetParam().study), options_, runs); }
  std::string describe(const Report& r) {
    std::string out = "verdict " + r.verdict + "\n";
    for (const auto& e : r.evidence) out += "  " + e + "\n";
    return out;
  }

  TempDir tmp_{"judge"};
  StudyOptions options_;
};

TEST_P(StudyJudge, ReproducedWhenEverySubClaimHolds) {
  const Report r = judge(synthetic(true));
  EXPECT_EQ(r.verdict, "reproduced") << describe(r);
  EXPECT_TRUE(r.failures.empty());
  for (const auto& e : r.evidence) EXPECT_EQ(e.find("cannot decide"), std::string::npos) << e;
}

TEST_P(StudyJudge, NotReproducedWhenEverySubClaimFails) {
  const Report r = judge(synthetic(false));
  EXPECT_EQ(r.verdict, "not reproduced") << describe(r);
}

TEST_P(StudyJudge, UsesAtLeastTwoSeedsByDefault) {
  EXPECT_GE(find_study(GetParam().study).default_seeds, 3);
  const Report r = judge(synthetic(true));
  bool counted = false;  // some evidence line says how many seeds its numbers rest on
  for (const auto& e : r.evidence)
    counted |= e.find("(3 seeds)") != std::string::npos || e.find("3 seeds") != std::string::npos;
  EXPECT_TRUE(counted) << describe(r);
  EXPECT_NE(r.verdict_rule.find("seed"), std::string::npos) << r.verdict_rule;
}

// The last seed contradicts the first two: no sub-claim is shown, none refuted.
TEST_P(StudyJudge, InconclusiveWhenSeedsDisagree) {
  const Report r = judge(synthetic([](int seed) { return seed != 3; }, "mixed"));
  EXPECT_EQ(r.verdict, "inconclusive") << describe(r);
  bool unclear = false;
  for (const auto& e : r.evidence) unclear |= e.find("unclear over the seeds") != std::string::npos;
  EXPECT_TRUE(unclear) << describe(r);
}

TEST_P(StudyJudge, IncompleteWhenARunFailed) {
  Runs runs = synthetic(true);
  make_failed(run_of(runs, GetParam().key_run), "normlab: error: data/kjv/meta.json is missing");
  const Report r = judge(runs);
  EXPECT_EQ(r.verdict, "incomplete") << describe(r);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0], GetParam().key_run + ": normlab: error: data/kjv/meta.json is missing");
  EXPECT_NE(r.verdict_rule.find("Incomplete"), std::string::npos);
}

// A run that says it finished but whose numbers are gone decides nothing either.
TEST_P(StudyJudge, IncompleteWhenANumberIsMissing) {
  Runs runs = synthetic(true);
  lose_files(run_of(runs, GetParam().key_run));
  const Report r = judge(runs);
  EXPECT_EQ(r.verdict, "incomplete") << describe(r);
  EXPECT_TRUE(r.failures.empty());
  bool undecided = false;
  for (const auto& e : r.evidence) undecided |= e.find("cannot decide: a number is missing") != std::string::npos;
  EXPECT_TRUE(undecided) << describe(r);
}

// The setup sentence comes from the runs' configs, not from text copied into the judge.
TEST_P(StudyJudge, SetupIsReadFromTheRunsConfigs) {
  const Runs runs = synthetic(true);
  const Report r = judge(runs);
  const Json& model = runs.front().config["model"];
  EXPECT_NE(r.setup.find(fmt::format("model.d_model {}", model["d_model"].get<int>())), std::string::npos) << r.setup;
  EXPECT_NE(r.setup.find(fmt::format("{} runs.", runs.size())), std::string::npos) << r.setup;
  EXPECT_EQ(r.setup.find("d 64, 4 heads"), std::string::npos) << "hand-copied setup: " << r.setup;
}

INSTANTIATE_TEST_SUITE_P(All, StudyJudge, ::testing::ValuesIn(judge_cases()), [](const auto& info) {
  std::string n = info.param.study;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
});

TEST(StudyJudgeCases, CoverEveryStudy) {
  std::set<std::string> covered;
  for (const JudgeCase& c : judge_cases()) covered.insert(c.study);
  for (const Study* s : all_studies())
    EXPECT_TRUE(covered.contains(std::string(s->name))) << s->name << " has no judge test";
}

// DyT "matches LayerNorm" only if there is a trained LayerNorm to match.
TEST(StudyJudgeDyt, ADivergedLayerNormIsNoMatch) {
  TempDir tmp("judge");
  StudyOptions options{.quick = true, .dir = tmp.path()};
  Runs runs = planned_runs(find_study("dyt-alpha"), options);
  dyt_alpha(runs, [](int) { return true; });
  RunOutcome& ln = run_of(runs, "layernorm-s1");
  lose_files(ln);
  write_diverged(ln);
  const Report r = judge_study(find_study("dyt-alpha"), options, runs);
  ASSERT_FALSE(r.evidence.empty());
  EXPECT_TRUE(r.evidence[0].starts_with("A.")) << r.evidence[0];
  EXPECT_NE(r.evidence[0].find("does not hold"), std::string::npos) << r.evidence[0];
  EXPECT_NE(r.verdict, "reproduced");
}

// A study run on encoder-decoders (--set model.shape=encoder_decoder) reads the decoder's layers, the stack the
// probes report: grad-by-depth's numbers under `decoder.layers.{i}` decide, and the encoder's, which would fail
// every sub-claim, are not mistaken for them.
TEST(StudyJudgeShapes, AnEncoderDecoderIsJudgedOnItsDecodersLayers) {
  TempDir tmp("judge");
  StudyOptions options{.quick = true, .overrides = {"model.shape=encoder_decoder"}, .dir = tmp.path()};
  const Study& study = find_study("grad-by-depth");
  Runs runs = planned_runs(study, options);
  for (RunOutcome& o : runs) {
    const int L = layers_of(o);
    const bool post = o.request.id.find("-post-") != std::string::npos;
    const std::vector<double> decoder =
        post ? ramp(size_t(L), 0.5, 1.0) : std::vector<double>(size_t(L), std::sqrt(2.0 / L));
    write_analysis(o, "grad-init",
                   fc2_grads(decoder, "decoder.", fc2_grads(std::vector<double>(size_t(L), L / 2.0), "encoder.")));
  }
  const Report r = judge_study(study, options, runs);
  EXPECT_EQ(r.verdict, "reproduced") << fmt::format("{}", fmt::join(r.evidence, "\n"));
}

// mt-depth reads the validation loss, not the BLEU: DeepNorm and Admin with the higher BLEU but the higher loss
// than Pre-LN do not make C hold, and neither does a cold Post-LN with the lower BLEU but the lower loss make A.
TEST(StudyJudgeMtDepth, JudgesTheValidationLossNotTheBleu) {
  TempDir tmp("judge");
  StudyOptions options{.quick = true, .dir = tmp.path()};
  const Study& study = find_study("mt-depth");
  Runs runs = planned_runs(study, options);
  for (RunOutcome& o : runs) {
    const std::string arm = arm_of(o);
    const bool deep_warm = arm.find("-L2-w10") != std::string::npos;
    if (arm == "post-L2-w0") write_translation(o, 1.0, false, 4.9);  // low BLEU, lower loss than warmed up
    else if (arm == "post-L2-w10") write_translation(o, 20.0, false, 5.0);
    else if (deep_warm && !arm.starts_with("pre-")) write_translation(o, 20.0, false, 5.4);
    else if (deep_warm) write_translation(o, 1.0, false, 5.0);
    else write_translation(o, 10.0);
    write_status(o);
  }
  const Report r = judge_study(study, options, runs);
  ASSERT_EQ(r.evidence.size(), 3u);
  EXPECT_NE(r.evidence[0].find("does not hold"), std::string::npos) << r.evidence[0];
  EXPECT_NE(r.evidence[2].find("does not hold"), std::string::npos) << r.evidence[2];
  EXPECT_EQ(r.verdict, "inconclusive") << r.evidence[1];  // B (every arm learns) still holds
}

// Judges find their arms in the axes' values: with a user's grid they judge what is there, and a
// sub-claim whose value the grid left out cannot decide, saying why, instead of crashing.
TEST(StudyJudgeGrid, UserAxesAreJudgedOrUndecidedWithAReason) {
  TempDir tmp("judge");
  const auto judged = [&](const std::string& study, const Writer& write, std::vector<std::string> grid) {
    StudyOptions options{.quick = true, .dir = tmp / study, .grid = std::move(grid)};
    Runs runs = planned_runs(find_study(study), options);
    write(runs, [](int) { return true; });
    for (const RunOutcome& o : runs) write_status(o);
    return judge_study(find_study(study), options, runs);
  };
  const auto has = [](const Report& r, const std::string& text) {
    for (const auto& e : r.evidence)
      if (e.find(text) != std::string::npos) return true;
    return false;
  };
  const Report depths = judged("grad-by-depth", grad_by_depth, {"model.n_layers=3,5"});
  EXPECT_EQ(depths.verdict, "reproduced") << depths.evidence[0];
  EXPECT_TRUE(has(depths, "depth 3 → 5")) << depths.evidence[0];
  const Report one = judged("grad-by-depth", grad_by_depth, {"model.n_layers=4"});
  EXPECT_EQ(one.verdict, "incomplete");
  EXPECT_TRUE(has(one, "cannot decide: the model.n_layers axis has one depth")) << one.evidence[0];
  const Report gpt2 = judged("grad-by-depth", grad_by_depth, {"init=gpt2"});
  EXPECT_TRUE(has(gpt2, "cannot decide: xavier is not on the init axis")) << gpt2.evidence[0];
  const Report warm = judged("warmup-grid", warmup_grid, {"train.warmup=10,20"});
  EXPECT_EQ(warm.verdict, "incomplete");
  EXPECT_TRUE(has(warm, "cannot decide: warm-up 0 is not on the train.warmup axis"));
  const Report lr = judged("warmup-grid", warmup_grid, {"train.lr=3e-4"});
  EXPECT_TRUE(has(lr, "cannot decide: no lr ≥ 1e-3 on the train.lr axis"));
  const Report alpha = judged("dyt-alpha", dyt_alpha, {"model.options.dyt_alpha=0.5"});
  EXPECT_TRUE(has(alpha, "cannot decide: the model.options.dyt_alpha axis has one value"));
  const Report slope = judged("one-step", one_step, {"model.n_layers=5"});
  EXPECT_EQ(slope.verdict, "incomplete");
  EXPECT_TRUE(has(slope, "cannot decide: the model.n_layers axis has one depth, a slope needs two"));
  const Report stream = judged("stream-at-init", stream_at_init, {"d_ff_multiple=2,8"});
  EXPECT_EQ(stream.verdict, "reproduced");
  EXPECT_TRUE(has(stream, "Pre-LN with d_ff = 8d grows"));
}

// The setup names each override's field with the value the runs used.
TEST(StudyJudgeSetup, NamesOverriddenAndVariedFields) {
  TempDir tmp("judge");
  StudyOptions options{.quick = true, .overrides = {"model.dropout=0.1"}, .dir = tmp.path()};
  Runs runs = planned_runs(find_study("dyt-alpha"), options);
  dyt_alpha(runs, [](int) { return true; });
  const std::string setup = judge_study(find_study("dyt-alpha"), options, runs).setup;
  EXPECT_NE(setup.find("model.dropout 0.1"), std::string::npos) << setup;
  EXPECT_NE(setup.find("model.placement {pre, dyt}"), std::string::npos) << setup;
  EXPECT_NE(setup.find("model.options.dyt_alpha {"), std::string::npos) << setup;
}

SeedValues values(std::vector<double> v) {
  SeedValues out;
  for (size_t i = 0; i < v.size(); ++i) out.seeds.push_back(static_cast<int>(i) + 1);
  out.values = std::move(v);
  return out;
}

TEST(SeedRule, MeanSdAndHowManySeeds) {
  const SeedValues v = values({1, 2, 3});
  EXPECT_DOUBLE_EQ(v.mean(), 2.0);
  EXPECT_DOUBLE_EQ(v.sd(), 1.0);
  EXPECT_EQ(v.show(), "2.000 ± 1.000 (3 seeds)");
  EXPECT_EQ(values({4}).show(), "4.000 (1 seed: indicative)");
  EXPECT_DOUBLE_EQ(values({4}).sd(), 0.0);
  EXPECT_EQ(values({1, NAN, NAN}).show(), "n/a (seeds 2, 3 missing)");
  EXPECT_TRUE(std::isnan(values({1, NAN}).mean()));
}

TEST(SeedRule, GreaterHoldsOnEverySeedBeyondThePooledSd) {
  EXPECT_EQ(decide_greater(values({2.0, 2.1, 2.2}), values({1.0, 1.1, 1.0})), Truth::holds);
  EXPECT_EQ(decide_less(values({1.0, 1.1, 1.0}), values({2.0, 2.1, 2.2})), Truth::holds);
  // No seed has a > b: refuted.
  EXPECT_EQ(decide_greater(values({1.0, 1.1, 1.0}), values({2.0, 2.1, 2.2})), Truth::fails);
  EXPECT_EQ(decide_greater(values({1.0, 1.0}), values({1.0, 1.0})), Truth::fails);  // a tie is not a > b
}

TEST(SeedRule, MixedSeedsAreUnclear) {
  EXPECT_EQ(decide_greater(values({2.0, 2.0, 0.5}), values({1.0, 1.0, 1.0})), Truth::unclear);
  EXPECT_EQ(decide_above(values({2.0, 2.0, 0.5}), 1.0), Truth::unclear);
  EXPECT_EQ(decide_below(values({2.0, 2.0, 0.5}), 1.0), Truth::unclear);
  EXPECT_EQ(decide_between(values({0.5, 1.5}), 0.0, 1.0), Truth::unclear);
}

TEST(SeedRule, AGapWithinTheNoiseIsUnclear) {
  // a > b on every seed, but by 0.1 while the seeds spread by ~1.
  EXPECT_EQ(decide_greater(values({1.1, 2.1, 3.1}), values({1.0, 2.0, 3.0})), Truth::unclear);
  // The same gap with little spread holds.
  EXPECT_EQ(decide_greater(values({1.1, 1.11, 1.12}), values({1.0, 1.01, 1.0})), Truth::holds);
}

TEST(SeedRule, ThresholdsHoldOnEverySeedAndFailOnNone) {
  EXPECT_EQ(decide_above(values({2.0, 3.0, 4.0}), 1.5), Truth::holds);
  EXPECT_EQ(decide_above(values({1.0, 1.2, 1.4}), 1.5), Truth::fails);
  EXPECT_EQ(decide_below(values({1.0, 1.2, 1.4}), 1.5), Truth::holds);
  EXPECT_EQ(decide_between(values({0.9, 1.1}), 0.5, 1.5), Truth::holds);
  EXPECT_EQ(decide_between(values({0.1, 2.0}), 0.5, 1.5), Truth::fails);
  EXPECT_EQ(decide_above(ratio(values({4, 6}), values({2, 2})), 1.5), Truth::holds);  // ratios per seed
  EXPECT_EQ(decide_above(difference(values({4, 6}), values({3, 5.8})), 0.5), Truth::unclear);
}

TEST(SeedRule, OneSeedIsItsDirection) {
  EXPECT_EQ(decide_greater(values({1.01}), values({1.0})), Truth::holds);
  EXPECT_EQ(decide_greater(values({0.99}), values({1.0})), Truth::fails);
  EXPECT_EQ(decide_above(values({2}), 1), Truth::holds);
}

TEST(SeedRule, AMissingSeedDecidesNothing) {
  EXPECT_EQ(decide_greater(values({2.0, NAN, 2.0}), values({1.0, 1.0, 1.0})), Truth::undecided);
  EXPECT_EQ(decide_greater(values({2.0, 2.0}), values({NAN, 1.0})), Truth::undecided);
  EXPECT_EQ(decide_above(values({2.0, NAN}), 1.0), Truth::undecided);
  EXPECT_EQ(decide_between(values({NAN}), 0, 1), Truth::undecided);
  EXPECT_EQ(decide_greater(values({}), values({})), Truth::undecided);
  EXPECT_EQ(decide_each({Truth::holds, Truth::undecided}), Truth::undecided);
  EXPECT_EQ(decide_each({Truth::holds, Truth::fails}), Truth::unclear);
  EXPECT_EQ(decide_each({Truth::fails, Truth::fails}), Truth::fails);
}

TEST(SeedRule, ADivergedSideIsAnInfiniteGap) {
  EXPECT_EQ(decide_greater(values({INFINITY, INFINITY}), values({4.0, 4.1})), Truth::holds);
  EXPECT_EQ(decide_greater(values({4.0, 4.1}), values({INFINITY, INFINITY})), Truth::fails);
}

TEST(SeedRule, UnclearClaimsMakeTheVerdictInconclusive) {
  EXPECT_EQ(combine_verdicts({Truth::holds, Truth::unclear}), "inconclusive");
  EXPECT_EQ(combine_verdicts({Truth::unclear, Truth::unclear}), "inconclusive");
  EXPECT_EQ(combine_verdicts({Truth::fails, Truth::unclear}), "inconclusive");
  EXPECT_EQ(combine_verdicts({Truth::undecided, Truth::unclear}), "incomplete");
  EXPECT_EQ(combine_verdicts({Truth::fails, Truth::fails}), "not reproduced");
  EXPECT_EQ(Truth::holds && Truth::unclear, Truth::unclear);
  EXPECT_EQ(Truth::fails && Truth::unclear, Truth::fails);
  EXPECT_EQ(Truth::holds || Truth::unclear, Truth::holds);
  EXPECT_EQ(!Truth::unclear, Truth::unclear);
  EXPECT_NE(said(Truth::unclear).find("unclear"), std::string::npos);
}

TEST(SeedList, CountListAndRange) {
  EXPECT_EQ(parse_seeds("3"), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(parse_seeds("101,102,103"), (std::vector<int>{101, 102, 103}));
  EXPECT_EQ(parse_seeds("101-103"), (std::vector<int>{101, 102, 103}));
  EXPECT_EQ(parse_seeds("7"), (std::vector<int>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(describe_seeds({101, 102, 103}), "101–103");
  EXPECT_EQ(describe_seeds({1, 5}), "1, 5");
  for (const char* bad : {"", "0", "x", "3-1", "1,,2", "1,1", "-2", "1.5", "101-", "2,a"}) {
    try {
      parse_seeds(bad);
      ADD_FAILURE() << "accepted --seeds " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--seeds"), std::string::npos) << e.what();
    }
  }
}

// The options' seeds name the runs: fresh confirmation seeds 101-103 give runs <arm>-s101 ...
TEST(SeedList, PlansRunTheGivenSeeds) {
  TempDir tmp("judge");
  StudyOptions options{.quick = true, .seeds = {101, 102}, .dir = tmp.path()};
  const Runs runs = planned_runs(find_study("depth-variance"), options);
  std::set<std::string> ids;
  for (const RunOutcome& o : runs) ids.insert(o.request.id);
  EXPECT_TRUE(ids.contains("pre-s101") && ids.contains("gpas-s102")) << fmt::format("{}", fmt::join(ids, " "));
  EXPECT_FALSE(ids.contains("pre-s1"));
  // Every arm of depth-variance uses the same norm, so they differ only in the factor under study.
  for (const RunOutcome& o : runs) EXPECT_EQ(o.config["model"]["norm"]["type"], "rmsnorm") << o.request.id;
  StudyOptions defaults{.dir = tmp.path() / "d"};
  EXPECT_EQ(plan_study(find_study("leaderboard"), defaults).size() % 3, 0u);
  EXPECT_EQ(defaults.seeds, (std::vector<int>{1, 2, 3}));
  StudyOptions quick{.quick = true, .dir = tmp.path() / "q"};
  plan_study(find_study("one-step"), quick);
  EXPECT_EQ(quick.seeds, (std::vector<int>{1}));
}

}  // namespace
}  // namespace normlab::study
