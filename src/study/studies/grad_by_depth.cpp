// Xiong et al. 2020, Thm 1 and Fig. 3: at initialization the gradient of the last layer's FFN weight
// does not depend on depth in Post-LN (and Post-LN's expected gradients, the norm of the gradient averaged over
// batches, grow toward the top in a 6-layer model), while in Pre-LN it shrinks like 1/√L. Measured over depths, seeds,
// and two inits: Xavier with unit-variance inputs (the theorem's regime) and GPT-2's N(0, 0.02), where small branches
// weaken the Post-LN effect.
#include <algorithm>
#include <cmath>

#include "model/placement.h"
#include "study/kit.h"
#include "study/studies/catalog.h"

namespace normlab::study {

namespace {

// The axes: depths (model.n_layers, kit.h depths()) and inits (init).
constexpr const char* kPlacements[] = {"post", "pre"};

std::string id_of(const std::string& init, const std::string& placement, int layers, int seed) {
  return fmt::format("{}-{}-L{}-s{}", init, placement, layers, seed);
}

std::vector<RunRequest> plan(const StudyOptions& o) {
  std::vector<RunRequest> runs;
  for (int seed : o.seeds)
    for (const std::string& init : o.text_axis("init"))
      for (const char* placement : kPlacements)
        for (int layers : depths(o)) {
          Json config = small_lm(placement, layers, 1, static_cast<uint64_t>(seed));
          if (init == "xavier") use_xavier(config);
          runs.push_back({id_of(init, placement, layers, seed), config, "probe", "grad-init"});
        }
  return runs;
}

// ‖∂L/∂W_fc2‖ of each layer (bottom to top) for one seed (NaN where missing).
std::vector<double> fc2_profile(const std::vector<RunOutcome>& runs, const std::string& init,
                                const std::string& placement, int layers, int seed) {
  const RunOutcome* run = find_run(runs, id_of(init, placement, layers, seed));
  Json a = run_analysis(run, "grad-init");
  std::vector<double> profile(static_cast<size_t>(layers), NAN);
  const std::vector<double> norms = numbers(a, "grad_norm");
  for (int l = 0; l < layers; ++l) {
    const std::string want = layer_tensor(run, l, "ffn.fc2.weight");
    for (size_t i = 0; i < norms.size(); ++i)
      if (a["name"][i] == want) profile[static_cast<size_t>(l)] = norms[i];
  }
  return profile;
}

// The same averaged over seeds, for charts.
std::vector<double> mean_profile(const std::vector<RunOutcome>& runs, const std::string& init,
                                 const std::string& placement, int layers, const std::vector<int>& seeds) {
  return seed_mean_each(seeds, static_cast<size_t>(layers),
                        [&](int seed) { return fc2_profile(runs, init, placement, layers, seed); });
}

// ---- The pre-registration: under Xavier init (the theorem's assumptions), ratios formed per seed -------------------

Json variables(const StudyOptions& o) {
  const std::vector<int> ds = depths(o);
  const std::vector<std::string> inits = o.text_axis("init");
  const double expected = std::sqrt(double(ds.front()) / ds.back());
  return {{"shallow", ds.front()},
          {"deep", ds.back()},
          {"expected", num(expected)},
          {"expected_lo", expected / 1.5},
          {"expected_hi", expected * 1.5},
          {"two_depths", ds.front() != ds.back()},
          {"xavier", std::find(inits.begin(), inits.end(), "xavier") != inits.end()}};
}

// ‖∂L/∂W_fc2‖ of one layer at init (grad-init), from the top when negative: the mean of the batches' norms
// (grad_norm), or the norm of their mean (expected_grad_norm, Xiong's "expected gradient").
Term fc2(const std::string& arm, int layer = -1, const char* column = "grad_norm") {
  return {
      arm, "analysis", {{"analysis", "grad-init"}, {"tensor", "ffn.fc2.weight"}, {"layer", layer}, {"column", column}}};
}
// The column of Fig. 3(a)'s statistic.
constexpr const char* kExpected = "expected_grad_norm";
const Need kXavier{"xavier", "xavier is not on the init axis"};
const Need kTwoDepths{"two_depths", "the model.n_layers axis has one depth, this needs two"};

const std::vector<ClaimSpec> kSubClaims = {
    {.id = "A",
     .statement = "Post-LN's last-layer gradient at init is flat in depth (Xavier)",
     .quote = kXiongTheorem1,
     .where = "Xiong et al. 2020, §3.3 Theorem 1, Fig. 3(c)",
     .of = fc2("xavier-post-L{deep}"),
     .against = fc2("xavier-post-L{shallow}"),
     .compare = Compare::ratio,
     .side = SubClaim::Side::within,
     .threshold = {0.67, 1.5},
     .needs = {kXavier, kTwoDepths}},
    {.id = "B",
     .statement = "Pre-LN's last-layer gradient shrinks like 1/√L: √({shallow}/{deep}) = {expected} (Xavier)",
     .quote = kXiongTheorem1,
     .where = "Xiong et al. 2020, §3.3 Theorem 1, Fig. 3(d)",
     .of = fc2("xavier-pre-L{deep}"),
     .against = fc2("xavier-pre-L{shallow}"),
     .compare = Compare::ratio,
     .side = SubClaim::Side::within,
     .threshold = {"expected_lo", "expected_hi"},
     .needs = {kXavier, kTwoDepths}},
    {.id = "C",
     .statement = "Post-LN's expected gradients grow toward the top layers at init (depth {shallow}, Xavier)",
     .quote = "\"It can be seen from the figure, the scale of the expected gradients grows along with the layer index "
              "for the Post-LN Transformer.\" (§3.4); \"For elements in a parameter matrix, we calculate their "
              "expected gradients and use the Frobenius norm of those values as the scale of the expected gradient of "
              "the matrix.\" (§3.4)",
     .where = "Xiong et al. 2020, §3.4 Fig. 3(a): the expected gradient's norm per layer of a 6-6 Post-LN "
              "encoder-decoder at init",
     .of = fc2("xavier-post-L{shallow}", -1, kExpected),
     .against = fc2("xavier-post-L{shallow}", 0, kExpected),
     .compare = Compare::ratio,
     .threshold = 1.0,
     .needs = {kXavier}},
};

const std::vector<ArmSpec> kArms = {
    {"xavier-post-L{deep}", "Post-LN at depth {deep}"},
    {"xavier-post-L{shallow}", "Post-LN at depth {shallow}"},
    {"xavier-pre-L{deep}", "Pre-LN at depth {deep}"},
    {"xavier-pre-L{shallow}", "Pre-LN at depth {shallow}"},
};

// ---- The report's evidence and charts ------------------------------------------------------------------------------

// The last-layer gradient against depth, and the table of last layer and last ÷ first, per init and placement.
void depth_chart_and_table(const StudyOptions& o, const std::vector<RunOutcome>& runs, Report& r) {
  Chart last{"last-layer fc2 gradient norm at init against depth (mean over seeds)", "depth L",
             "‖∂L/∂W_fc2‖ (last layer)"};
  last.log_y = true;
  Table table{"fc2 gradient at init: last layer, and last ÷ first layer (over seeds)",
              {"init", "placement", "depth", "last layer", "last / first"}};
  for (const std::string& init : o.text_axis("init"))
    for (const char* placement : kPlacements) {
      Series s{fmt::format("{}, {}", model::placement_label(placement), init), {}, {}};
      for (int layers : depths(o)) {
        const std::string arm = fmt::format("{}-{}-L{}", init, placement, layers);
        const SeedValues top = measure_term(fc2(arm), Json::object(), runs, o.seeds);
        const SeedValues bottom = measure_term(fc2(arm, 0), Json::object(), runs, o.seeds);
        s.x.push_back(layers), s.y.push_back(top.mean());
        table.rows.push_back({init, placement, std::to_string(layers), top.show(), ratio(top, bottom).show()});
      }
      last.series.push_back(s);
    }
  r.charts.push_back(last);
  r.tables.push_back(table);
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const int deep = depths(o).back();
  Report r;
  r.setup =
      "normlab probe --analysis grad-init on each config (3 inits × 4 batches per run: A and B the mean of the 12 "
      "per-batch norms, C the expected gradient, the norm of the 4 batches' mean gradient, averaged over the 3 inits); "
      "inits: Xavier with √d-scaled N(0, d^-1/2) embeddings (unit-variance stream, the theorem's regime) and GPT-2 "
      "N(0, 0.02).";
  depth_chart_and_table(o, runs, r);
  for (const std::string& init : o.text_axis("init")) {
    Chart profile{fmt::format("fc2 gradient by layer at depth {}, {} init (mean over seeds)", deep, init), "layer",
                  "‖∂L/∂W_fc2‖"};
    profile.log_y = true;
    for (const char* placement : kPlacements)
      profile.series.push_back(
          indexed_series(model::placement_label(placement), mean_profile(runs, init, placement, deep, o.seeds)));
    r.charts.push_back(profile);
  }
  const Json v = variables(o);
  const auto values = [&](const Term& t) { return measure_term(t, v, runs, o.seeds); };
  const auto depth_ratio = [&](const char* init, const char* placement) {
    const std::string arm = fmt::format("{}-{}-L", init, placement);
    return ratio(values(fc2(arm + "{deep}")), values(fc2(arm + "{shallow}"))).show();
  };
  const auto top_over_bottom = [&](const char* init, const char* placement) {
    const std::string arm = fmt::format("{}-{}-L{{deep}}", init, placement);
    return ratio(values(fc2(arm)), values(fc2(arm, 0))).show();
  };
  const auto expected_top_over_bottom = [&](const char* placement, const char* depth) {
    const std::string arm = fmt::format("xavier-{}-L{}", placement, depth);
    return ratio(values(fc2(arm, -1, kExpected)), values(fc2(arm, 0, kExpected))).show();
  };
  r.evidence = {
      fmt::format("Pre-LN at depth {}: last-layer ÷ first-layer gradient {}", deep, top_over_bottom("xavier", "pre")),
      fmt::format("Last ÷ first layer's expected gradient (C's statistic), Xavier: Post-LN {} at the shallowest depth, "
                  "{} at the deepest; the mean of per-batch norms instead (C's earlier statistic), Post-LN at the "
                  "deepest: {}",
                  expected_top_over_bottom("post", "{shallow}"), expected_top_over_bottom("post", "{deep}"),
                  top_over_bottom("xavier", "post")),
      fmt::format("Contrast (not in the verdict), GPT-2 init: Post-LN depth ratio {}, last ÷ first {}; Pre-LN depth "
                  "ratio {}, last ÷ first {}",
                  depth_ratio("gpt2", "post"), top_over_bottom("gpt2", "post"), depth_ratio("gpt2", "pre"),
                  top_over_bottom("gpt2", "pre")),
  };
  r.verdict_rule = "The GPT-2 init runs are shown for contrast only.";
  return r;
}

}  // namespace

extern const Study kGradByDepth{
    .name = "grad-by-depth",
    .title = "Gradient norm per layer at initialization, by depth",
    .claim =
        "At init, Post-LN's last-layer FFN gradient is independent of depth and Post-LN's expected gradients grow "
        "toward the top layers; Pre-LN's last-layer gradient shrinks like 1/√L.",
    .source =
        "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture (arXiv 2002.04745), Thm 1 and Fig. "
        "3.",
    .paper_setting =
        "Xiong et al. Thm 1 and Fig. 3(c, d): at init, encoder-decoders of 6-6, 8-8, 10-10, 12-12 and 14-14 layers, d "
        "512, Xavier init, 10 seeds; the last FFN's W² gradient stays at about 1.6 for Post-LN and falls with depth "
        "for Pre-LN; Fig. 3(a, b): per-layer expected gradients (the norm of the batch-averaged gradient) of a 6-6 "
        "model "
        "grow with the layer index in Post-LN.",
    .cost = "default ~1 min on 2 cores (5 seeds), --quick ~15 s",
    .axes =
        {{.key = "model.n_layers",
          .defaults = "6,12,24,48",
          .quick = "2,4,8",
          .description =
              "depths at init; A and B compare the shallowest with the deepest, C reads the shallowest (6 by default, "
              "Fig. 3(a)'s depth)"},
         {.key = "init",
          .defaults = "xavier,gpt2",
          .quick = "xavier,gpt2",
          .description = "initializations: xavier (√d-scaled unit-variance embeddings, the theorem's regime, "
                         "judged) and gpt2 (N(0, 0.02), a contrast)",
          .choices = "xavier,gpt2",
          .sets = "model.init.scheme"}},
    .plan = plan,
    .arms = kArms,
    .variables = variables,
    .sub_claims = kSubClaims,
    .judge = judge,
};

}  // namespace normlab::study
