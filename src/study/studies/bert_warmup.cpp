// BERT's warm-up question on an encoder (a masked LM): Post-LN vs Pre-LN, with and without warm-up, at the usual
// and at a higher learning rate.
//   Xiong et al. 2020 (arXiv 2002.04745) §4.1–4.2, Figure 5 (a): Post-LN BERT is trained with warm-up (lr 1e-4,
//   10k steps; lr 3e-4 diverged); Pre-LN BERT trains without it, at a larger learning rate, and reaches the same
//   validation loss in fewer updates than Post-LN BERT with warm-up.
// Both arms are BERT-style encoders (bidirectional attention, BERT's 15% / 80-10-10 masking, a LayerNorm on the
// embeddings) that differ only in the placement.
#include <algorithm>
#include <cmath>

#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

struct Grid {
  std::vector<double> lrs;
  std::vector<int> warmups;
};
Grid grid(const StudyOptions& o) {
  Grid g{o.number_axis("train.lr"), o.int_axis("train.warmup")};
  std::sort(g.lrs.begin(), g.lrs.end()), std::sort(g.warmups.begin(), g.warmups.end());
  return g;
}
constexpr const char* kPlacements[] = {"post", "pre"};

std::string id_of(const std::string& placement, double lr, int warmup, int seed) {
  return fmt::format("{}-lr{:g}-w{}-s{}", placement, lr, warmup, seed);
}

std::vector<RunRequest> plan(const StudyOptions& o) {
  const Grid g = grid(o);
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (const char* placement : kPlacements)
      for (double lr : g.lrs)
        for (int warmup : g.warmups) {
          // 1000 steps: at 300 (the first design run, seeds 1-3) no arm left the unigram plateau; a masked LM gets
          // a target at 15% of the positions, a decoder at every one.
          Json config = small_lm(placement, o.quick ? 4 : 6, o.quick ? 40 : 1000, static_cast<uint64_t>(seed), warmup);
          config["model"]["shape"] = "encoder";
          config["model"]["embed_norm"] = true;
          config["train"]["lr"] = lr;
          runs.push_back({id_of(placement, lr, warmup, seed), config, "train", ""});
        }
  return runs;
}

// A cell's worst seed: its outcome and mean final validation loss, for every placement, warm-up and lr.
Table cell_table(const StudyOptions& o, const Grid& g, const std::vector<RunOutcome>& runs) {
  std::vector<std::string> header = {"placement", "warm-up"};
  for (double lr : g.lrs) header.push_back(fmt::format("lr {:g}", lr));
  Table table{
      std::string("Worst outcome over the seeds and mean final validation loss per cell (") + stalled_rule() + ")",
      header};
  for (const char* placement : kPlacements)
    for (int warmup : g.warmups) {
      std::vector<std::string> row = {placement, std::to_string(warmup)};
      for (double lr : g.lrs) {
        const TrainResult c =
            worst_over_seeds(runs, o.seeds, [&](int seed) { return id_of(placement, lr, warmup, seed); });
        row.push_back(fmt::format("{} {}", outcome_name(c.outcome), num(c.val_loss)));
      }
      table.rows.push_back(row);
    }
  return table;
}

// ---- The pre-registration ------------------------------------------------------------------------------------------

Json variables(const StudyOptions& o) {
  const Grid g = grid(o);
  return {{"high", g.lrs.back()},
          {"low", g.lrs.front()},
          {"longest", g.warmups.back()},
          {"lr", g.lrs},
          {"cold", g.warmups.front() == 0},
          {"warmed", g.warmups.back() > 0},
          {"two_lrs", g.lrs.front() < g.lrs.back()}};
}

const std::vector<ArmSpec> kClaimArms = {
    {"post-lr{high}-w0", "Post-LN at lr {high}, no warm-up"},
    {"post-lr{high}-w{longest}", "Post-LN at lr {high}, {longest} warm-up steps"},
    {"pre-lr{high}-w0", "Pre-LN at lr {high}, no warm-up"},
    {"pre-lr{lr}-w0", "Pre-LN without warm-up at lr {lr}"},
    {"post-lr{low}-w{longest}", "Post-LN at lr {low}, {longest} warm-up steps"},
};

const Need kCold{"cold", "warm-up 0 is not on the train.warmup axis"};
const Need kWarmed{"warmed", "no warm-up > 0 on the train.warmup axis"};

const std::vector<ClaimSpec> kSubClaims = {
    // A train-or-stall question (the final losses split into seeds that trained and seeds that did not): it counts
    // the seeds where Post-LN without warm-up did not train while the warmed one did, by the sign test.
    {.id = "A",
     .statement = "Without warm-up, Post-LN at lr {high} fails to train where the warmed one trains",
     .quote = "We have tried to use a larger learning rate (such as 3e-4) for the Post-LN BERT but found the "
              "optimization diverged.",
     .where = "Xiong et al. 2020, §4.1",
     .of = {"post-lr{high}-w0", "not_trained"},
     .against = Term{"post-lr{high}-w{longest}", "not_trained"},
     .compare = Compare::difference,
     .threshold = 0.0,
     .needs = {kCold, kWarmed},
     .test = SubClaim::Test::sign},
    {.id = "B",
     .statement = "Pre-LN trains without warm-up at every lr",
     .quote = "Similar to the machine translation tasks, the learning rate warm-up stage can be removed for the "
              "Pre-LN model.",
     .where = "Xiong et al. 2020, §4.2, Fig. 5(a)",
     .of = {"pre-lr{lr}-w0", "not_trained", Json::object(), Extreme::largest},
     .side = SubClaim::Side::below,
     .threshold = kHalfASeed,
     .needs = {kCold},
     .test = SubClaim::Test::sign},
    // Fig. 5(a)'s statistic: the updates each placement needs to reach a target loss, each at its own lr (Post-LN the
    // lower with warm-up, as BERT's recipe; Pre-LN the higher without), compared seed by seed as a count.
    {.id = "C",
     .statement = "Pre-LN at lr {high} without warm-up learns in fewer steps than Post-LN at lr {low} with {longest} "
                  "warm-up steps",
     .quote = "For example, the Post-LN model achieves 1.69 validation loss at 500k updates while the Pre-LN model "
              "achieves similar validation loss at 700k updates, which suggests there is a 40% speed-up rate.",
     .where = "Xiong et al. 2020, §4.2, Fig. 5(a) (the sentence swaps the labels; the figure has Pre-LN first)",
     .of = {"pre-lr{high}-w0", "steps_to_trained_line"},
     .against = Term{"post-lr{low}-w{longest}", "steps_to_trained_line"},
     .compare = Compare::difference,
     .side = SubClaim::Side::below,
     .threshold = 0.0,
     .needs = {kCold, kWarmed, {"two_lrs", "the train.lr axis has one lr; C compares each placement at its own"}},
     .test = SubClaim::Test::sign},
};

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const Grid g = grid(o);
  const double high = g.lrs.back();
  const int longest = g.warmups.back();
  Report r;
  r.setup =
      "Encoders trained as masked LMs (BERT's 15% masking, replaced 80/10/10; a LayerNorm on the embeddings); Post-LN "
      "and Pre-LN differ in nothing else. Linear warm-up, then a constant lr.";
  r.tables.push_back(cell_table(o, g, runs));
  const auto val = [&](const char* placement, double lr, int warmup) {
    return over_seeds(
        o.seeds, [&](int seed) { return val_loss_or_unigram(find_run(runs, id_of(placement, lr, warmup, seed))); });
  };
  const SeedValues post_cold = val("post", high, 0), post_warm = val("post", high, longest),
                   pre_cold = val("pre", high, 0);

  for (int warmup : {0, longest}) {
    Chart curves{fmt::format("training loss at lr {:g}, warm-up {} (seed {})", high, warmup, o.seeds.front()), "step",
                 "loss"};
    for (const char* placement : kPlacements)
      curves.series.push_back(loss_series(placement, find_run(runs, id_of(placement, high, warmup, o.seeds.front()))));
    r.charts.push_back(curves);
  }
  r.tables.push_back(outcome_table("Every run", runs));

  r.evidence = {
      fmt::format("final validation loss at lr {:g}: Post-LN {} without warm-up, {} with {} warm-up steps; "
                  "Pre-LN {} without",
                  high, post_cold.show(), post_warm.show(), longest, pre_cold.show())};
  r.verdict_rule = "A run trains when its final training loss ends below " + trained_line() + " (" + stalled_rule() +
                   "); A's validation losses are the evidence.";
  return r;
}

}  // namespace

extern const Study kBertWarmup{
    .name = "bert-warmup",
    .title = "BERT without warm-up: Post-LN vs Pre-LN encoders (masked LM)",
    .claim =
        "A Post-LN BERT needs learning-rate warm-up: without it, at a learning rate that Pre-LN takes, it fails to "
        "train. A Pre-LN BERT trains without warm-up, at a higher rate, in fewer steps than the Post-LN BERT with it.",
    .source =
        "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture (arXiv 2002.04745) §4.1, "
        "§4.2 and Figure 5 (a); Devlin et al. 2019, BERT (arXiv 1810.04805) §3.1 for the masking.",
    .paper_setting =
        "Xiong et al. §4, Fig. 5: BERT-base (12 layers, d 768) on Wikipedia + BookCorpus, masked LM; Post-LN at lr "
        "1e-4 with 10k warm-up steps (lr 3e-4 diverged), Pre-LN at lr 3e-4 without warm-up reaches the same validation "
        "loss (about 1.69) some 40% sooner.",
    .cost = "default ~1.2 h on 2 cores (8 runs × 8 seeds, --jobs 2), --quick ~20 s (4 runs)",
    .default_seeds = "8",
    .large = "model.n_layers=12 train.steps=2000",
    .axes = {{.key = "train.lr",
              .defaults = "1e-3,3e-3",
              .quick = "1e-3,3e-3",
              .description = "learning rates (constant after warm-up); A and C read the highest, B every one"},
             {.key = "train.warmup",
              .defaults = "0,100",
              .quick = "0,10",
              .large = "0,200",
              .description = "warm-up lengths in steps; A, B and C read 0, A and C the longest"}},
    .plan = plan,
    .arms = kClaimArms,
    .variables = variables,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
