// Deep encoder-decoder translation: which norm placements train at growing depth, with and without warm-up.
//   Liu et al. 2020, Admin (arXiv 2004.08249) §3, Table 1 and Figure 1: a deep Post-LN translation model fails
//   to train (or trains worse) where Pre-LN trains, and Admin trains at every depth with the better BLEU.
//   Wang et al. 2022, DeepNet (arXiv 2203.00555) §5 and Table 2: DeepNorm trains deep encoder-decoders stably and
//   above Pre-LN's BLEU. Xiong et al. 2020 (arXiv 2002.04745) §3.2: Post-LN needs warm-up, Pre-LN does not.
// Every arm is the same encoder-decoder on the KJV ↔ Reina-Valera 1909 verse pairs (data/kjv-rv), with encoder
// and decoder of equal depth; the arms differ only in the placement (DeepNorm and Admin with their
// encoder-decoder constants) and the warm-up. The comparisons A and C read the held-out cross-entropy (the
// papers' dev perplexity): at the default budget (d 64, 800 steps) greedy BLEU sat at 0.1-0.3 on the first runs,
// below the resolution of 100 pairs, while the validation losses separated the arms. BLEU is reported beside it.
// The measure was switched after those 4 runs of seed 1, so the judging runs use other seeds (docs/studies.md).
#include <algorithm>
#include <cmath>

#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

constexpr const char* kPlacements[] = {"post", "pre", "deepnorm", "admin"};

struct Grid {
  std::vector<int> depths, warmups;
};
Grid grid(const StudyOptions& o) {
  Grid g{o.int_axis("model.n_layers"), o.int_axis("train.warmup")};
  std::sort(g.depths.begin(), g.depths.end()), std::sort(g.warmups.begin(), g.warmups.end());
  return g;
}

std::string id_of(const std::string& placement, int depth, int warmup, int seed) {
  return fmt::format("{}-L{}-w{}-s{}", placement, depth, warmup, seed);
}

std::vector<RunRequest> plan(const StudyOptions& o) {
  const Grid g = grid(o);
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (const char* placement : kPlacements)
      for (int depth : g.depths)
        for (int warmup : g.warmups) {
          Json config = small_lm(placement, depth, o.quick ? 40 : 800, static_cast<uint64_t>(seed), warmup);
          // encoder_layers 0: the encoder as deep as the decoder. No label smoothing: the loss stays the plain
          // cross-entropy that the trained / stalled rule compares with the unigram entropy.
          config["model"]["shape"] = "encoder_decoder";
          config["train"]["bleu_pairs"] = o.quick ? 16 : 100;
          runs.push_back({id_of(placement, depth, warmup, seed), config, "train", ""});
        }
  return runs;
}

// A run's BLEU; a diverged run translates nothing, so it scores 0. NaN if it failed or lacks the number. Shown,
// not judged.
double bleu_or_zero(const std::vector<RunOutcome>& runs, const std::string& id) {
  const TrainResult r = train_result(find_run(runs, id));
  return r.outcome == Outcome::diverged ? 0.0 : r.bleu;
}

// Each cell's worst outcome over the seeds, mean validation loss and mean BLEU.
Table cell_table(const StudyOptions& o, const Grid& g, const std::vector<RunOutcome>& runs) {
  std::vector<std::string> header = {"placement", "warm-up"};
  for (int depth : g.depths) header.push_back(fmt::format("{} + {} layers", depth, depth));
  Table table{
      std::string("Worst outcome over the seeds, mean validation loss and mean BLEU per cell (") + stalled_rule() + ")",
      header};
  for (const char* placement : kPlacements)
    for (int warmup : g.warmups) {
      std::vector<std::string> row = {placement, std::to_string(warmup)};
      for (int depth : g.depths) {
        const auto id = [&](int seed) { return id_of(placement, depth, warmup, seed); };
        const TrainResult c = worst_over_seeds(runs, o.seeds, id);
        row.push_back(fmt::format("{}, val {}, BLEU {}", outcome_name(c.outcome), num(c.val_loss),
                                  num(seed_mean(o.seeds, [&](int seed) { return bleu_or_zero(runs, id(seed)); }))));
      }
      table.rows.push_back(row);
    }
  return table;
}

// ---- The pre-registration ------------------------------------------------------------------------------------------

Json variables(const StudyOptions& o) {
  const Grid g = grid(o);
  const bool cold = g.warmups.front() == 0, warmed = g.warmups.back() > 0;
  return {{"deep", g.depths.back()},
          {"longest", g.warmups.back()},
          {"depth", g.depths},
          {"repair", Json::array({"deepnorm", "admin"})},
          {"cold", cold},
          {"warmed", warmed},
          {"cold_and_warmed", cold && warmed}};
}

const std::vector<ArmSpec> kClaimArms = {
    {"post-L{deep}-w0", "Post-LN at {deep} + {deep} layers without warm-up"},
    {"post-L{deep}-w{longest}", "Post-LN at {deep} + {deep} layers with {longest} warm-up steps"},
    {"pre-L{depth}-w0", "Pre-LN without warm-up (depths {depth})"},
    {"{repair}-L{depth}-w0", "DeepNorm and Admin without warm-up (depths {depth})"},
    {"pre-L{deep}-w{longest}", "Pre-LN at {deep} + {deep} layers with {longest} warm-up steps"},
    {"deepnorm-L{deep}-w{longest}", "DeepNorm at {deep} + {deep} layers with {longest} warm-up steps"},
    {"admin-L{deep}-w{longest}", "Admin at {deep} + {deep} layers with {longest} warm-up steps"},
};

const Need kWarmed{"warmed", "no warm-up > 0 on the train.warmup axis"};
const Need kCold{"cold", "warm-up 0 is not on the train.warmup axis"};

// At the deepest depth with the longest warm-up, a repair's validation loss against Pre-LN's.
ClaimSpec better_than_pre(std::string id, std::string statement, std::string quote, std::string where,
                          const std::string& arm) {
  return {.id = std::move(id),
          .statement = std::move(statement),
          .quote = std::move(quote),
          .where = std::move(where),
          .of = {arm, "final_val_loss"},
          .against = Term{"pre-L{deep}-w{longest}", "final_val_loss"},
          .compare = Compare::difference,
          .side = SubClaim::Side::below,
          .threshold = 0.0,
          .needs = {kWarmed}};
}

const std::vector<ClaimSpec> kSubClaims = {
    {.id = "A",
     .statement = "Without warm-up, a {deep} + {deep} layers Post-LN translates worse",
     .quote = "First, we can see that for both optimizers, the learning rate warm-up stage is essential.",
     .where = "Xiong et al. 2020, §3.2, Fig. 2; Admin (Liu et al. 2020) Table 1",
     .of = {"post-L{deep}-w0", "final_val_loss"},
     .against = Term{"post-L{deep}-w{longest}", "final_val_loss"},
     .compare = Compare::difference,
     .threshold = 0.0,
     .needs = {{"cold_and_warmed", "the train.warmup axis needs 0 and a warm-up > 0"}}},
    // Train or not is a count: `not_trained` is 1 or 0 per seed (the largest over the cells: 1 if any did not train),
    // and the exact sign test asks whether more seeds lie below ½ than above.
    {.id = "B1",
     .statement = "Pre-LN trains without warm-up at every depth",
     .quote = "First, as we can see from the figure, the learning rate warm-up stage is not critical anymore for "
              "training the Pre-LN Transformer and the performance of the learned model is competitive.",
     .where = "Xiong et al. 2020, §4.2, Fig. 4",
     .of = {"pre-L{depth}-w0", "not_trained", Json::object(), Extreme::largest},
     .side = SubClaim::Side::below,
     .threshold = kHalfASeed,
     .needs = {kCold},
     .test = SubClaim::Test::sign},
    {.id = "B2",
     .statement = "(this lab's own question: DeepNet and Admin train with warm-up) DeepNorm and Admin train without "
                  "warm-up at every depth",
     .of = {"{repair}-L{depth}-w0", "not_trained", Json::object(), Extreme::largest},
     .side = SubClaim::Side::below,
     .threshold = kHalfASeed,
     .needs = {kCold},
     .test = SubClaim::Test::sign},
    better_than_pre("C1", "At {deep} + {deep} layers, DeepNorm translates better than Pre-LN",
                    "The proposed method combines the best of two worlds, i.e., good performance of Post-LN and stable "
                    "training of Pre-LN, making DeepNorm a preferred alternative.",
                    "Wang et al. 2022, DeepNet, abstract and Table 1", "deepnorm-L{deep}-w{longest}"),
    better_than_pre("C2", "At {deep} + {deep} layers, Admin translates better than Pre-LN",
                    "Extensive experiments show that Admin is more stable, converges faster, and leads to better "
                    "performance",
                    "Liu et al. 2020, Admin, abstract and Table 1", "admin-L{deep}-w{longest}"),
};

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const Grid g = grid(o);
  const int deep = g.depths.back(), longest = g.warmups.back();
  Report r;
  r.setup =
      "Encoder-decoders (encoder and decoder of equal depth, cross-attention, no label smoothing) translating KJV "
      "verses into the Reina-Valera 1909; the arms differ only in the placement and the warm-up (linear, then a "
      "constant lr). Judged on the held-out cross-entropy of the target tokens (a diverged run counts as the unigram "
      "entropy); BLEU "
      "(greedy decoding of held-out pairs, sacreBLEU's definitions, a diverged run scoring 0) is shown beside it.";

  r.tables.push_back(cell_table(o, g, runs));

  const auto val = [&](const char* placement, int warmup) {
    return over_seeds(
        o.seeds, [&](int seed) { return val_loss_or_unigram(find_run(runs, id_of(placement, deep, warmup, seed))); });
  };
  const auto bleu = [&](const char* placement, int warmup) {
    return over_seeds(o.seeds, [&](int seed) { return bleu_or_zero(runs, id_of(placement, deep, warmup, seed)); });
  };
  const SeedValues post_cold = val("post", 0), post_warm = val("post", longest), pre_warm = val("pre", longest),
                   deepnorm_warm = val("deepnorm", longest), admin_warm = val("admin", longest);
  const std::string at = fmt::format("{} + {} layers", deep, deep);

  Chart curves{fmt::format("training loss at {} + {} layers without warm-up (seed {})", deep, deep, o.seeds.front()),
               "step", "loss"};
  for (const char* placement : kPlacements)
    curves.series.push_back(loss_series(placement, find_run(runs, id_of(placement, deep, 0, o.seeds.front()))));
  r.charts.push_back(curves);
  r.tables.push_back(outcome_table("Every run", runs));

  r.evidence = {
      fmt::format("validation loss at {}: Post-LN {} without warm-up, {} with {} warm-up steps (BLEU {} vs {})", at,
                  post_cold.show(), post_warm.show(), longest, bleu("post", 0).show(), bleu("post", longest).show()),
      fmt::format("with {} warm-up steps: DeepNorm {}, Admin {}, Pre-LN {} (BLEU {}, {} vs {})", longest,
                  deepnorm_warm.show(), admin_warm.show(), pre_warm.show(), bleu("deepnorm", longest).show(),
                  bleu("admin", longest).show(), bleu("pre", longest).show()),
  };
  r.verdict_rule =
      "A run trains when its final training loss ends below " + trained_line() +
      "; a diverged run's validation loss counts as the unigram entropy. BLEU is shown, not judged: at this budget it "
      "is below the resolution of its held-out pairs.";
  return r;
}

}  // namespace

extern const Study kMtDepth{
    .name = "mt-depth",
    .title = "Deep translation models: Post-LN, Pre-LN, DeepNorm and Admin encoder-decoders with and without warm-up",
    .claim =
        "A deep Post-LN encoder-decoder needs warm-up (without it, it translates worse or not at all); Pre-LN, "
        "DeepNorm and Admin train at every depth without it; at depth, DeepNorm and Admin translate better than "
        "Pre-LN (judged here on held-out cross-entropy, BLEU shown).",
    .source =
        "Liu et al. 2020, Understanding the Difficulty of Training Transformers (Admin, arXiv 2004.08249) §3, Table 1, "
        "Figure 1; Wang et al. 2022, DeepNet (arXiv 2203.00555) §5, Table 2; Xiong et al. 2020 (arXiv 2002.04745) "
        "§3.2.",
    .paper_setting =
        "Admin Table 1: WMT14 En-De with 6, 12 and 18 layers per side (lr 1e-3, warm-up 8000, 500k updates): 18-layer "
        "Post-LN diverges, Admin 29.03 against Pre-LN 28.38 BLEU. DeepNet Table 1: WMT-17 En-De from 6L-6L to "
        "100L-100L, Post-LN unstable from 50L-50L, DeepNet 28.9 BLEU at 100L-100L.",
    .cost = "default ~1.5 h on 2 cores (16 runs × 8 seeds, --jobs 2), --quick ~2 min (16 runs)",
    .default_seeds = "8",
    .large = "train.steps=2000",
    .large_size = LargeSize::without_context,
    .axes = {{.key = "model.n_layers",
              .defaults = "2,6",
              .quick = "1,2",
              .large = "6,12",
              .description = "layers of the encoder and of the decoder (equal); A and C read the deepest, B every one"},
             {.key = "train.warmup",
              .defaults = "0,200",
              .quick = "0,10",
              .large = "0,500",
              .description = "warm-up lengths in steps; A and B read 0, A and C the longest"}},
    .plan = plan,
    .arms = kClaimArms,
    .variables = variables,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
