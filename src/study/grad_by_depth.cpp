// Xiong et al. 2020, Thm 1 and Fig. 3: at initialization the gradient of the last layer's FFN weight
// does not depend on depth in Post-LN (and Post-LN's gradients grow toward the top), while in Pre-LN
// it shrinks like 1/√L. Measured over depths, seeds, and two inits: Xavier with unit-variance inputs
// (the theorem's regime) and GPT-2's N(0, 0.02), where small branches weaken the Post-LN effect.
#include <algorithm>
#include <cmath>

#include "study/catalog.h"
#include "study/kit.h"

namespace normlab::study {

namespace {

// The axes: depths (model.n_layers) and inits (init).
std::vector<int> depths(const StudyOptions& o) {
  std::vector<int> d = o.int_axis("model.n_layers");
  std::sort(d.begin(), d.end());
  return d;
}
constexpr const char* kPlacements[] = {"post", "pre"};

std::string id_of(const std::string& init, const std::string& placement, int layers, int seed) {
  return fmt::format("{}-{}-L{}-s{}", init, placement, layers, seed);
}

std::vector<RunRequest> plan(const StudyOptions& o) {
  std::vector<RunRequest> runs;
  for (int seed = 1; seed <= o.seeds; ++seed)
    for (const std::string& init : o.text_axis("init"))
      for (const char* placement : kPlacements)
        for (int layers : depths(o)) {
          Json config = small_lm(placement, layers, 1, static_cast<uint64_t>(seed));
          if (init == "xavier") use_xavier(config);
          runs.push_back({id_of(init, placement, layers, seed), config, "probe", "grad-init"});
        }
  return runs;
}

// ‖∂L/∂W_fc2‖ of each layer (bottom to top), averaged over seeds.
std::vector<double> fc2_profile(const std::vector<RunOutcome>& runs, const std::string& init,
                                const std::string& placement, int layers, int seeds) {
  return seed_mean_each(seeds, static_cast<size_t>(layers), [&](int seed) {
    Json a = run_analysis(find_run(runs, id_of(init, placement, layers, seed)), "grad-init");
    std::vector<double> profile(static_cast<size_t>(layers), NAN);
    const std::vector<double> norms = numbers(a, "grad_norm");
    for (int l = 0; l < layers; ++l) {
      const std::string want = fmt::format("layers.{}.ffn.fc2.weight", l);
      for (size_t i = 0; i < norms.size(); ++i)
        if (a["name"][i] == want) profile[static_cast<size_t>(l)] = norms[i];
    }
    return profile;
  });
}

Report judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  const std::vector<int> ds = depths(o);
  const int shallow = ds.front(), deep = ds.back();
  Report r;
  r.setup =
      "normlab probe --analysis grad-init on each config (mean of 3 inits × 4 batches per run); inits: Xavier with "
      "√d-scaled N(0, d^-1/2) embeddings (unit-variance stream, the theorem's regime) and GPT-2 N(0, 0.02).";

  Chart last{"last-layer fc2 gradient norm at init against depth", "depth L", "‖∂L/∂W_fc2‖ (last layer)"};
  last.log_y = true;
  Table table{"fc2 gradient at init: last layer, and last ÷ first layer",
              {"init", "placement", "depth", "last layer", "last / first"}};
  struct Summary {
    double depth_ratio, top_over_bottom;
  };
  auto summarize = [&](const std::string& init, const std::string& placement) {
    Series s{fmt::format("{}-LN, {}", placement == "post" ? "Post" : "Pre", init), {}, {}};
    Summary out{NAN, NAN};
    double first_last = NAN;
    for (int layers : ds) {
      const auto p = fc2_profile(runs, init, placement, layers, o.seeds);
      s.x.push_back(layers);
      s.y.push_back(p.back());
      table.rows.push_back({init, placement, std::to_string(layers), num(p.back()), num(p.back() / p.front())});
      if (layers == shallow) first_last = p.back();
      if (layers == deep) out = {p.back() / first_last, p.back() / p.front()};
    }
    last.series.push_back(s);
    return out;
  };
  const Summary post_x = summarize("xavier", "post"), pre_x = summarize("xavier", "pre");
  const Summary post_g = summarize("gpt2", "post"), pre_g = summarize("gpt2", "pre");
  r.charts.push_back(last);
  for (const std::string& init : o.text_axis("init")) {
    Chart profile{fmt::format("fc2 gradient by layer at depth {}, {} init", deep, init), "layer", "‖∂L/∂W_fc2‖"};
    profile.log_y = true;
    for (const char* placement : kPlacements) {
      profile.series.push_back(indexed_series(placement == std::string("post") ? "Post-LN" : "Pre-LN",
                                              fc2_profile(runs, init, placement, deep, o.seeds)));
    }
    r.charts.push_back(profile);
  }
  r.tables.push_back(table);

  const double expected = std::sqrt(double(shallow) / deep);
  // The sub-claims are about Xavier init, and A and B compare two depths: without them, nothing is decided.
  const auto& inits = o.text_axis("init");
  const bool xavier = std::find(inits.begin(), inits.end(), "xavier") != inits.end();
  const std::string missing = !xavier           ? "cannot decide: xavier is not on the init axis"
                              : shallow == deep ? "cannot decide: the model.n_layers axis has one depth, this needs two"
                                                : "";
  const auto verdict = [&](Truth t, bool needs_two_depths) {
    return !xavier || (needs_two_depths && shallow == deep) ? Truth::undecided : t;
  };
  const auto say = [&](Truth t, bool needs_two_depths, std::string_view holds = "holds",
                       std::string_view fails = "does not hold") {
    return !xavier || (needs_two_depths && shallow == deep) ? missing : said(t, holds, fails);
  };
  const Truth a = verdict(between(post_x.depth_ratio, 0.67, 1.5), true);
  const Truth b = verdict(between(pre_x.depth_ratio, expected / 1.5, expected * 1.5), true);
  const Truth c = verdict(greater(post_x.top_over_bottom, 1.5), false);
  r.evidence = {
      fmt::format("A. Xavier, Post-LN last-layer gradient, depth {} → {}: ratio {} — {}", shallow, deep,
                  num(post_x.depth_ratio), say(a, true, "flat in depth (holds)", "not flat (does not hold)")),
      fmt::format("B. Xavier, Pre-LN last-layer gradient, depth {} → {}: ratio {} against √({}/{}) = {} — {}", shallow,
                  deep, num(pre_x.depth_ratio), shallow, deep, num(expected), say(b, true)),
      fmt::format("C. Xavier, Post-LN at depth {}: last-layer ÷ first-layer gradient {} (Pre-LN: {}) — {}", deep,
                  num(post_x.top_over_bottom), num(pre_x.top_over_bottom),
                  say(c, false, "grows toward the top (holds)")),
      fmt::format(
          "Contrast (not in the verdict), GPT-2 init: Post-LN depth ratio {}, last ÷ first {}; Pre-LN depth ratio {}, "
          "last ÷ first {}",
          num(post_g.depth_ratio), num(post_g.top_over_bottom), num(pre_g.depth_ratio), num(pre_g.top_over_bottom)),
  };
  r.verdict = combine_verdicts({a, b, c});
  r.verdict_rule = fmt::format(
      "Under Xavier init (the theorem's assumptions), from the shallowest ({}) to the deepest ({}) model: A. Post-LN's "
      "last-layer fc2 gradient ratio within [0.67, 1.5]; B. Pre-LN's ratio within a factor 1.5 of √(L_shallow/L_deep); "
      "C. at the deepest, Post-LN's last-layer gradient > 1.5× its first layer's. All hold: reproduced; none: not "
      "reproduced; otherwise inconclusive. The GPT-2 init runs are shown for contrast only.",
      shallow, deep);
  return r;
}

}  // namespace

extern const Study kGradByDepth{
    .name = "grad-by-depth",
    .title = "Gradient norm per layer at initialization, by depth",
    .claim =
        "At init, Post-LN's last-layer FFN gradient is independent of depth and Post-LN's gradients grow toward the "
        "top "
        "layers; Pre-LN's last-layer gradient shrinks like 1/√L.",
    .source =
        "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture (arXiv 2002.04745), Thm 1 and Fig. "
        "3.",
    .cost = "default ~1 min on 2 cores, --quick ~15 s",
    .axes = {{.key = "model.n_layers",
              .defaults = "6,12,24,48",
              .quick = "2,4,8",
              .description = "depths at init; A and B compare the shallowest with the deepest, C reads the deepest"},
             {.key = "init",
              .defaults = "xavier,gpt2",
              .quick = "xavier,gpt2",
              .description = "initializations: xavier (√d-scaled unit-variance embeddings, the theorem's regime, "
                             "judged) and gpt2 (N(0, 0.02), a contrast)",
              .choices = "xavier,gpt2",
              .sets = "model.init.scheme"}},
    .plan = plan,
    .judge = judge,
};

}  // namespace normlab::study
