// The on-demand analyses of `normlab probe` (src/analysis/analyses.h), each on a case whose answer is
// known without running the analysis: ReZero at init is the identity map, q = k = 0 attends
// uniformly, a step of size 0 changes nothing, and gradient norms at init equal a direct
// forward/backward over the same inits and batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "analysis/analyses.h"
#include "common/error.h"
#include "model/crms_convert.h"
#include "model/init.h"
#include "probe/probe_test_util.h"
#include "train/run.h"
#include "train/trainer.h"

namespace normlab::analysis {
namespace {

using engine::Role;
using namespace probe::testing;

// ReZero, 3 layers, every α = 0 after model::initialize: each block is exactly the identity.
train::RunConfig rezero_config() { return tiny_run({{"placement", "rezero"}, {"n_layers", 3}}); }

TEST(ProbeAnalyses, ReZeroAtInitDroppingAnyLayerChangesTheLossByExactlyZero) {
  const train::RunConfig c = rezero_config();
  auto m = fresh_model(c);
  for (int l = 0; l < 3; ++l)
    ASSERT_EQ(values(m->graph, m->graph.at(fmt::format("layers.{}.rezero_alpha", l)))[0], 0.0);
  const train::Loader loader = make_loader(c);
  AnalysisSettings s;
  s.batches = 2;
  const Json r = layer_drop(*m, loader, s);
  const double full = r.at("full_loss").get<double>();
  EXPECT_TRUE(std::isfinite(full) && full > 0) << r.dump();
  EXPECT_DOUBLE_EQ(full, train::evaluate(*m, loader, 2).loss);
  ASSERT_EQ(r.at("layer").size(), 3u);
  ASSERT_EQ(r.at("delta_loss").size(), 3u);
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(r["layer"][l].get<int>(), static_cast<int>(l));
    EXPECT_EQ(r["delta_loss"][l].get<double>(), 0.0) << "layer " << l << ": " << r.dump();
    EXPECT_EQ(r["loss"][l].get<double>(), full) << "layer " << l;
  }

  // Control: with α₁ ≠ 0 only layer 1 does anything, so only dropping it changes the loss. At init the logits are
  // tiny and the loss is near ln V whatever the stream holds: α₁ = 0.5 moved it by under one fp32 ulp (4.8e−7),
  // α₁ = 20 moves it by about 80.
  model::fill_constant(*m, "layers.1.rezero_alpha", 20.0);
  const Json active = layer_drop(*m, loader, s);
  EXPECT_EQ(active["delta_loss"][0].get<double>(), 0.0) << active.dump();
  EXPECT_NE(active["delta_loss"][1].get<double>(), 0.0) << active.dump();
  EXPECT_EQ(active["delta_loss"][2].get<double>(), 0.0) << active.dump();
}

TEST(ProbeAnalyses, ReZeroAtInitEveryAngularDistanceIsZero) {
  const train::RunConfig c = rezero_config();
  auto m = fresh_model(c);
  const train::Loader loader = make_loader(c);
  for (int span : {1, 2, 3}) {
    AnalysisSettings s;
    s.batches = 2;
    s.span = span;
    const Json r = angular_distances(*m, loader, s);
    EXPECT_EQ(r.at("span").get<int>(), span);
    ASSERT_EQ(r.at("angular_distance").size(), static_cast<size_t>(4 - span)) << r.dump();  // L + 1 streams
    for (size_t l = 0; l < r["angular_distance"].size(); ++l) {
      EXPECT_EQ(r["layer"][l].get<size_t>(), l);
      EXPECT_EQ(r["angular_distance"][l].get<double>(), 0.0) << "span " << span << ", layer " << l;
    }
  }
  // Control: α₁ ≠ 0 turns the stream in layer 1 only.
  model::fill_constant(*m, "layers.1.rezero_alpha", 0.5);
  AnalysisSettings s;
  s.batches = 2;
  const Json r = angular_distances(*m, loader, s);
  EXPECT_EQ(r["angular_distance"][0].get<double>(), 0.0);
  EXPECT_GT(r["angular_distance"][1].get<double>(), 1e-4);
  EXPECT_LE(r["angular_distance"][1].get<double>(), 1.0);
  EXPECT_EQ(r["angular_distance"][2].get<double>(), 0.0);
  // span 2 compares x_0 with x_2 and x_1 with x_3: both pairs straddle layer 1.
  s.span = 2;
  const Json r2 = angular_distances(*m, loader, s);
  ASSERT_EQ(r2.at("angular_distance").size(), 2u);
  EXPECT_EQ(r2["angular_distance"][0].get<double>(), r["angular_distance"][1].get<double>());
  EXPECT_EQ(r2["angular_distance"][1].get<double>(), r["angular_distance"][1].get<double>());
}

TEST(ProbeAnalyses, LayerDropIsRefusedForPlacementsThatCombineLayers) {
  const train::RunConfig c = tiny_run({{"placement", "dlcl_pre"}});
  auto m = fresh_model(c);
  const train::Loader loader = make_loader(c);
  AnalysisSettings s;
  s.batches = 1;
  EXPECT_THROW(layer_drop(*m, loader, s), Error);
}

// With q = k = 0 (weights and biases) every logit is 0, so query t attends uniformly over its t + 1
// visible keys: entropy log(t + 1). The analysis averages over queries (and batches), so each head
// reads (1/T)·Σ_{t<T} log(t + 1) = log(T!)/T.
TEST(ProbeAnalyses, UniformAttentionHasEntropyLogTPlusOneAveragedOverQueries) {
  const train::RunConfig c = tiny_run({{"placement", "pre"}});
  auto m = fresh_model(c, engine::DType::f64);
  const train::Loader loader = make_loader(c);
  AnalysisSettings s;
  s.batches = 2;
  const int T = c.train.seq_len;
  const double uniform = std::lgamma(T + 1.0) / T;

  const Json random_init = attention_entropy(*m, loader, s);  // small random q, k: nearly uniform, never more
  model::scale_roles(*m, {Role::q, Role::k}, 0.0, /*with_biases=*/true);
  const Json r = attention_entropy(*m, loader, s);
  const size_t entries = static_cast<size_t>(c.model.n_layers * c.model.n_heads);
  ASSERT_EQ(r.at("entropy").size(), entries) << r.dump();
  for (size_t i = 0; i < entries; ++i) {
    EXPECT_EQ(r["layer"][i].get<int>(), static_cast<int>(i) / c.model.n_heads);
    EXPECT_EQ(r["head"][i].get<int>(), static_cast<int>(i) % c.model.n_heads);
    EXPECT_NEAR(r["entropy"][i].get<double>(), uniform, 1e-12) << "layer " << r["layer"][i] << " head " << r["head"][i];
    EXPECT_LT(random_init["entropy"][i].get<double>(), uniform);
    EXPECT_GT(random_init["entropy"][i].get<double>(), 0.9 * uniform);
  }
}

TEST(ProbeAnalyses, OneStepOfSizeZeroChangesNoOutput) {
  const train::RunConfig c = tiny_run({{"placement", "post"}});
  auto m = fresh_model(c);
  const train::Loader loader = make_loader(c);
  std::vector<std::string> before;
  for (auto id : m->graph.parameters()) before.push_back(raw_bytes(m->graph, id));

  AnalysisSettings s;
  s.lr = 0;
  const Json zero = one_step_output_change(*m, loader, c, s);
  EXPECT_EQ(zero.at("lr").get<double>(), 0.0);
  EXPECT_EQ(zero.at("output_change_rms").get<double>(), 0.0);
  EXPECT_EQ(zero.at("stack_change_ms").get<double>(), 0.0);
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(raw_bytes(m->graph, m->graph.parameters()[i]), before[i]) << m->graph.spec(m->graph.parameters()[i]).name;

  s.lr = 1e-3;
  const Json step = one_step_output_change(*m, loader, c, s);
  EXPECT_EQ(step.at("lr").get<double>(), 1e-3);
  EXPECT_GT(step.at("output_change_rms").get<double>(), 0.0);
  EXPECT_TRUE(std::isfinite(step.at("output_change_rms").get<double>()));
  EXPECT_GT(step.at("stack_change_ms").get<double>(), 0.0);
}

// Admin's definition: |F(x, W*) − F(x, W)|² of the stack's output (the stream leaving the last layer)
// on validation batch 0, not on the update batch: recomputed here from the moved model and an unmoved
// twin (same config and seed), exactly; the same quantity on the update batch differs.
TEST(ProbeAnalyses, OneStepAdminDefinitionIsTheStackChangeOnAnotherBatch) {
  const train::RunConfig c = tiny_run({{"placement", "post"}, {"n_layers", 3}});
  auto moved = fresh_model(c), twin = fresh_model(c);
  const train::Loader loader = make_loader(c);
  AnalysisSettings s;
  s.lr = 1e-3;
  const double reported = one_step_output_change(*moved, loader, c, s).at("stack_change_ms").get<double>();
  auto stack_change = [&](const train::Batch& b) {
    std::vector<double> after, before;
    for (auto [m, out] : {std::pair{moved.get(), &after}, std::pair{twin.get(), &before}}) {
      m->set_batch(b.tokens.data(), b.targets.data());
      m->forward(false);
      *out = values(m->graph, m->landmarks.layer_inputs.back());
    }
    double sum = 0;
    for (size_t i = 0; i < after.size(); ++i) sum += (after[i] - before[i]) * (after[i] - before[i]);
    return sum / static_cast<double>(after.size());
  };
  train::Batch other, update;
  loader.eval_batch(0, 1, other);
  loader.train_batch(1, 0, update);
  EXPECT_GT(reported, 0.0);
  EXPECT_DOUBLE_EQ(reported, stack_change(other));
  EXPECT_NE(reported, stack_change(update));
  EXPECT_EQ(twin->landmarks.layer_inputs.size(), 4u);  // L + 1: the last is the stack's output
}

// Branch noise on a Pre-LN stack whose branches are switched off (every branch's last linear map zero, so each
// outputs 0 whatever its input): the stream leaving the stack is x_0 + Σ_i ε_i exactly, and F = FinalNorm(x_N)
// changes by J·Σ_i ε_i with J = P/σ (σ² = the row's variance + eps, P the projection that removes the row's mean
// and its own direction, rank d − 2). With N independent branches of noise variance C the mean square of ΔF is
// N·C·(d − 2)/d · mean over rows of 1/σ²: linear in N (the same noise on every branch would give N²), and scaled
// by the final norm (the raw stream's change would be N·C).
TEST(ProbeAnalyses, BranchNoiseOnSwitchedOffBranchesMatchesTheClosedForm) {
  for (int layers : {1, 3}) {
    const train::RunConfig c = tiny_run({{"placement", "pre"}, {"n_layers", layers}});
    auto m = fresh_model(c);
    for (int l = 0; l < layers; ++l)
      for (const char* linear : {"attn.o", "ffn.fc2"})
        for (const char* part : {"weight", "bias"}) {
          const std::string name = fmt::format("layers.{}.{}.{}", l, linear, part);
          if (m->graph.find(name) != engine::kNoTensor) model::fill_constant(*m, name, 0.0);
        }
    const train::Loader loader = make_loader(c);
    AnalysisSettings s;
    s.batches = 4;
    s.branch_noise = 1e-4;  // the final norm divides by σ ≈ 0.02 (GPT-2 init): keeps ΔF small beside F
    const Json r = branch_noise_output_change(*m, loader, c, s);
    ASSERT_EQ(r.at("branches").get<int>(), 2 * layers);

    const int64_t d = c.model.d_model;
    double inverse_variance = 0;
    int64_t rows = 0;
    train::Batch batch;
    for (int b = 0; b < s.batches; ++b) {
      loader.eval_batch(b, s.batches, batch);
      m->set_batch(batch.tokens.data(), batch.targets.data());
      m->forward(false);
      const std::vector<double> x = values(m->graph, m->landmarks.layer_inputs.back());
      for (size_t at = 0; at < x.size(); at += size_t(d), ++rows) {
        double mean = 0, square = 0;
        for (int64_t j = 0; j < d; ++j) mean += x[at + size_t(j)] / double(d);
        for (int64_t j = 0; j < d; ++j) square += (x[at + size_t(j)] - mean) * (x[at + size_t(j)] - mean) / double(d);
        inverse_variance += 1 / (square + c.model.norm.eps);
      }
    }
    const double C = s.branch_noise * s.branch_noise;
    const double want = 2.0 * layers * C * double(d - 2) / double(d) * inverse_variance / double(rows);
    EXPECT_DOUBLE_EQ(r.at("branch_noise_var").get<double>(), C);
    // 4 draws of 4 × 16 rows × 30 free directions: the estimate's relative sd is about √(2/7680) = 1.6%.
    EXPECT_NEAR(r.at("output_change_var").get<double>(), want, 0.08 * want) << layers << " layers: " << r.dump();
  }
}

// The two output changes disagree on a Pre-LN model: one Adam step moves every branch the same way, so its output
// change grows about like N² (log-log slope near 2), while independent noise on each branch grows like log N
// (slope well below 1), as Admin's Theorem 2 says. Xavier init with unit-variance embeddings, as one-step uses.
TEST(ProbeAnalyses, BranchNoiseGrowsSlowerThanTheAdamStepInPreLn) {
  std::vector<double> adam, noise;
  for (int layers : {1, 8}) {
    const train::RunConfig c = tiny_run({{"placement", "pre"},
                                         {"n_layers", layers},
                                         {"embed_scale", "sqrt_d"},
                                         {"init", {{"scheme", "xavier"}, {"embed_std", 0.0}}}});
    const train::Loader loader = make_loader(c);
    AnalysisSettings s;
    s.lr = 1e-5;
    auto m = fresh_model(c);
    noise.push_back(branch_noise_output_change(*m, loader, c, s).at("output_change_var").get<double>());
    adam.push_back(std::pow(one_step_output_change(*m, loader, c, s).at("output_change_rms").get<double>(), 2));
  }
  const auto slope = [](const std::vector<double>& v) { return std::log(v[1] / v[0]) / std::log(16.0 / 2.0); };
  EXPECT_GT(slope(adam), 1.5) << adam[0] << " → " << adam[1];
  EXPECT_LT(slope(noise), 1.0) << noise[0] << " → " << noise[1];
}

// The inits averaged for run seed s are not those of seed s + 1 (seed + k made seeds 1–3 share two of
// their three inits).
TEST(ProbeAnalyses, FreshInitsOfDifferentSeedsAreDistinct) {
  std::set<uint64_t> seen;
  for (uint64_t seed = 1; seed <= 5; ++seed)
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(seen.insert(fresh_init_seed(seed, k)).second) << seed << ", " << k;
  EXPECT_EQ(fresh_init_seed(7, 1), fresh_init_seed(7, 1));
}

// gradient_norms_at_init = the mean over seeds × batches of ‖∂L/∂W‖, and expected_grad_norm = the mean over seeds
// of ‖the gradient averaged over that seed's batches‖, one entry per parameter in graph order, reproduced here by a
// direct forward/backward over the same inits and batches. By the triangle inequality the norm of the mean is at
// most the mean of the norms, and below it wherever the batches' gradients point different ways.
TEST(ProbeAnalyses, GradientNormsAtInitEqualADirectComputation) {
  const train::RunConfig c = tiny_run({{"placement", "pre"}});
  const train::Loader loader = make_loader(c);
  AnalysisSettings s;
  s.seeds = 2;
  s.batches = 2;
  const Json r = gradient_norms_at_init(c, loader, s);

  auto m = model::build_model(c.model, c.train.batch_size, c.train.seq_len);
  const auto& params = m->graph.parameters();
  ASSERT_EQ(r.at("name").size(), params.size());
  ASSERT_EQ(r.at("grad_norm").size(), params.size());
  ASSERT_EQ(r.at("expected_grad_norm").size(), params.size());
  std::vector<double> mean_of_norms(params.size(), 0.0), norm_of_mean(params.size(), 0.0);
  train::Batch batch;
  for (int seed = 0; seed < s.seeds; ++seed) {
    model::initialize(*m, fresh_init_seed(c.train.seed, seed));
    std::vector<std::vector<double>> sum(params.size());
    for (int b = 0; b < s.batches; ++b) {
      loader.train_batch(b + 1, seed, batch);
      m->set_batch(batch.tokens.data(), batch.targets.data());
      m->graph.zero_param_grads();
      m->forward(false);
      m->graph.backward(m->loss);
      for (size_t i = 0; i < params.size(); ++i) {
        const std::vector<double> g = values(m->graph, params[i], true);
        mean_of_norms[i] += l2(g) / (s.seeds * s.batches);
        sum[i].resize(g.size(), 0.0);
        for (size_t j = 0; j < g.size(); ++j) sum[i][j] += g[j] / s.batches;
      }
    }
    for (size_t i = 0; i < params.size(); ++i) norm_of_mean[i] += l2(sum[i]) / s.seeds;
  }
  int below = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = m->graph.spec(params[i]).name;
    const double got = r["grad_norm"][i].get<double>(), expected = r["expected_grad_norm"][i].get<double>();
    EXPECT_EQ(r["name"][i].get<std::string>(), name);
    EXPECT_NEAR(got, mean_of_norms[i], 1e-9 * (1 + mean_of_norms[i])) << name;
    EXPECT_NEAR(expected, norm_of_mean[i], 1e-9 * (1 + norm_of_mean[i])) << name;
    EXPECT_LE(expected, got * (1 + 1e-12)) << name;
    below += expected < 0.99 * got;
    // ‖∂L/∂W‖ of the attention's key bias is 0 in exact arithmetic (softmax is shift-invariant).
    if (!name.ends_with("attn.k.bias")) {
      EXPECT_GT(mean_of_norms[i], 0.0) << name;
    }
  }
  EXPECT_GT(below, static_cast<int>(params.size()) / 2) << "the two statistics differ on most parameters";

  // One batch per init: the expected gradient is that batch's, so the two columns agree exactly.
  s.batches = 1;
  const Json one = gradient_norms_at_init(c, loader, s);
  for (size_t i = 0; i < params.size(); ++i) {
    const double each = one["grad_norm"][i].get<double>();
    EXPECT_NEAR(one["expected_grad_norm"][i].get<double>(), each, 1e-12 * (1 + each)) << i;
  }
}

// ReZero at init: every weight inside a branch is multiplied by α = 0, so its gradient is exactly 0;
// α's own gradient and the embeddings' are not.
TEST(ProbeAnalyses, GradientNormsAtInitForReZeroVanishInsideEveryBranch) {
  const train::RunConfig c = rezero_config();
  const train::Loader loader = make_loader(c);
  AnalysisSettings s;
  s.seeds = 1;
  s.batches = 2;
  const Json r = gradient_norms_at_init(c, loader, s);
  int alphas = 0, branch = 0;
  for (size_t i = 0; i < r.at("name").size(); ++i) {
    const std::string name = r["name"][i].get<std::string>();
    const double norm = r["grad_norm"][i].get<double>();
    if (name.ends_with("rezero_alpha")) {
      ++alphas;
      EXPECT_GT(norm, 0.0) << name;
    } else if (name.starts_with("layers.")) {
      ++branch;
      EXPECT_EQ(norm, 0.0) << name;
    } else {
      EXPECT_GT(norm, 0.0) << name;  // embeddings
    }
  }
  EXPECT_EQ(alphas, 3);
  EXPECT_GT(branch, 0);
}

// Pre-LN with bias-free LayerNorm and untied embeddings, its weights moved off their init (unit gains
// and zero biases would make the identities easy), against its Pre-RMSNorm and Pre-CRMSNorm forms.
TEST(ProbeAnalyses, NormEquivalenceFindsTheThreeFormsEqualToRounding) {
  const train::RunConfig c =
      tiny_run({{"placement", "pre"}, {"tied_embeddings", false}, {"norm", {{"type", "layernorm"}, {"bias", false}}}});
  auto m = fresh_model(c);
  for (engine::TensorId id : m->graph.parameters()) {
    float* w = m->graph.data<float>(id);
    for (int64_t i = 0; i < m->graph.shape(id).numel(); ++i)
      w[i] += 0.1f * static_cast<float>(std::sin(3.0 * static_cast<double>(i) + 1.0));
  }
  const Json r = norm_equivalence(*m, make_loader(c));
  ASSERT_EQ(r.at("variant").size(), 4u) << r.dump();
  for (size_t i = 0; i < 4; ++i) {
    const bool f64 = r["precision"][i] == "fp64", rms = r["variant"][i] == "pre_rms";
    EXPECT_EQ(r["variant"][i].get<std::string>(), i % 2 == 0 ? "pre_rms" : "pre_crms");
    EXPECT_LE(r["logits_max_error"][i].get<double>(), f64 ? 1e-12 : 1e-5) << r.dump();
    EXPECT_LE(r["loss_error"][i].get<double>(), f64 ? 1e-12 : 1e-5) << r.dump();
    if (rms) EXPECT_LE(r["grad_max_rel_error"][i].get<double>(), f64 ? 1e-10 : 1e-3) << r.dump();
    else EXPECT_TRUE(r["grad_max_rel_error"][i].is_null());
  }
}

TEST(ProbeAnalyses, NormEquivalenceRefusesModelsItCannotCompare) {
  for (const json& model : {json{{"placement", "post"}}, json{{"placement", "pre"}}}) {
    const train::RunConfig c = tiny_run(model);
    auto m = fresh_model(c);
    try {
      norm_equivalence(*m, make_loader(c));
      ADD_FAILURE() << "accepted " << model.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("model.norm.bias=false, model.tied_embeddings=false"), std::string::npos)
          << e.what();
    }
  }
}

// stream-init is the mean of the stream statistic over fresh inits × batches, as a direct loop computes it.
TEST(ProbeAnalyses, StreamAtInitEqualsADirectComputation) {
  const train::RunConfig c = tiny_run({{"placement", "pre"}, {"n_layers", 3}});
  const train::Loader loader = make_loader(c);
  AnalysisSettings s;
  s.seeds = 2;
  s.batches = 2;
  const Json r = stream_at_init(c, loader, s);
  ASSERT_EQ(r.at("mean_square").size(), 4u);
  auto m = model::build_model(c.model, c.train.batch_size, c.train.seq_len);
  std::vector<double> expected(4, 0.0);
  train::Batch batch;
  for (int seed = 0; seed < s.seeds; ++seed) {
    model::initialize(*m, fresh_init_seed(c.train.seed, seed));
    for (int b = 0; b < s.batches; ++b) {
      loader.train_batch(b + 1, seed, batch);
      m->set_batch(batch.tokens.data(), batch.targets.data());
      m->forward(false);
      for (size_t l = 0; l < 4; ++l) {
        const auto v = values(m->graph, m->landmarks.layer_inputs[l]);
        expected[l] += l2(v) * l2(v) / static_cast<double>(v.size()) / (s.seeds * s.batches);
      }
    }
  }
  for (size_t l = 0; l < 4; ++l) {
    EXPECT_EQ(r["layer"][l].get<int>(), static_cast<int>(l));
    EXPECT_NEAR(r["mean_square"][l].get<double>(), expected[l], 1e-9 * expected[l]) << "layer " << l;
  }
}

// The memory check of normlab probe counts the models an analysis builds beside the run's: the most any
// one analysis holds at once, and the bound holds for the largest (norm-equivalence's three fp64 models).
TEST(ProbeAnalyses, MemoryNeedsCoverTheModelsTheAnalysesBuild) {
  EXPECT_EQ(memory_needs("angular,attention-entropy").extra_models, 0);
  EXPECT_FALSE(memory_needs("angular").optimizer);
  EXPECT_FALSE(memory_needs("angular,layer-drop,massive-activations,logit-lens,grad-init").gradients)
      << "the model read needs no gradients unless an analysis steps its optimizer";
  EXPECT_TRUE(memory_needs("angular,one-step").gradients);
  const train::MemoryNeeds usual = memory_needs("grad-init,one-step,angular,layer-drop,attention-entropy");
  EXPECT_EQ(usual.extra_models, 2);  // grad-init: a fresh model and its gradient sums
  EXPECT_EQ(memory_needs("one-step,branch-noise,layer-drop").extra_models, 0);
  EXPECT_EQ(memory_needs("one-step,branch-noise,layer-drop").extra_inference_models, 0);
  EXPECT_EQ(memory_needs("one-step,branch-noise,layer-drop").extra_sharing_models, 1)
      << "layer-drop's model without a layer runs forward only, on the run's weights";
  EXPECT_TRUE(usual.optimizer);
  EXPECT_EQ(memory_needs("stream-init").extra_inference_models, 1);
  EXPECT_EQ(memory_needs("layer-drop,norm-equivalence").extra_models, 6);

  const train::RunConfig c =
      tiny_run({{"placement", "pre"}, {"tied_embeddings", false}, {"norm", {{"type", "layernorm"}, {"bias", false}}}});
  const train::Run planned = train::plan_run(c, 0, memory_needs("norm-equivalence"));
  std::size_t fp64_models = 0;
  const model::ModelConfig& ln = planned.config.model;
  model::ModelConfig rms = ln;
  model::set_placement(rms, "pre_rms");
  rms.norm.type = "rmsnorm";
  for (const model::ModelConfig& mc : {ln, rms, model::crms_config_for(ln)}) {
    auto m = model::build_model(mc, c.train.batch_size, c.train.seq_len, engine::DType::f64);
    fp64_models += m->graph.arena_bytes();
  }
  EXPECT_LE(fp64_models, planned.memory.extra_models) << "norm-equivalence's models exceed the estimate";
  EXPECT_NE(planned.memory.breakdown().find("analysis models"), std::string::npos);
}

// A value planted in the token embedding of one token: the stream entering layer 0 holds it at that token's first place
// and feature, and a Pre-LN stack's residual path carries it to the output (the branches add values of order 1).
TEST(ProbeAnalyses, MassiveActivationsFindsAPlantedValue) {
  const train::RunConfig c = tiny_run({{"placement", "pre"}});
  auto m = fresh_model(c);
  const train::Loader loader = make_loader(c);
  train::Batch batch;
  loader.eval_batch(0, 1, batch);
  // A token that stands once in the batch: its one place is where the peak must be found.
  const auto once = std::find_if(batch.tokens.begin(), batch.tokens.end(), [&](int32_t t) {
    return std::count(batch.tokens.begin(), batch.tokens.end(), t) == 1;
  });
  ASSERT_NE(once, batch.tokens.end());
  const int32_t token = *once;
  const auto place = static_cast<size_t>(once - batch.tokens.begin());
  const int64_t feature = 7, width = m->config.stream_width();
  engine::Graph& g = m->graph;
  g.data<float>(g.at("embed.tokens.weight"))[token * width + feature] = 1000.0f;
  AnalysisSettings s;
  s.batches = 1;
  s.token_text = [](int32_t id) { return fmt::format("<{}>", id); };
  const Json r = massive_activations(*m, loader, s);
  ASSERT_EQ(r.at("layer").size(), 3u) << r.dump();  // L + 1 streams
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(r["feature"][l].get<int64_t>(), feature) << "stream " << l << ": " << r.dump();
    EXPECT_EQ(r["token_id"][l].get<int32_t>(), token) << "stream " << l;
    EXPECT_EQ(r["token"][l].get<std::string>(), fmt::format("<{}>", token));
    EXPECT_EQ(r["row"][l].get<size_t>() * static_cast<size_t>(c.train.seq_len) + r["position"][l].get<size_t>(), place);
    EXPECT_GT(r["max_abs"][l].get<double>(), 990.0);
    EXPECT_GT(r["max_over_median"][l].get<double>(), 1000.0);
    EXPECT_LT(r["rms"][l].get<double>(), r["max_abs"][l].get<double>() / 10);
  }
  EXPECT_NEAR(r["value"][0].get<double>(), 1000.0, 1.0);  // the token's embedding plus its position's
}

// The logit lens reads each stream through the model's own final norm and head: fed the stack's output it is the
// model itself, so its loss there equals the model's evaluated loss (the final norm's gain of 5 makes logits of order
// 10, so a readout that skipped the norm would be far off). Post-LN has no final norm: the readout is the head alone
// (its rows scaled up for the same reason).
TEST(ProbeAnalyses, LogitLensAtTheLastStreamIsTheModelsLoss) {
  for (const char* placement : {"pre", "post"}) {
    const train::RunConfig c = tiny_run({{"placement", placement}, {"tied_embeddings", false}});
    auto m = fresh_model(c);
    engine::Graph& g = m->graph;
    if (m->config.has_final_norm()) model::fill_constant(*m, "final_norm.weight", 5.0);
    else  // the head's rows, 20 times larger (a constant head would make every stream's logits uniform)
      for (float *w = g.data<float>(g.at("lm_head.weight")), *end = w + g.shape(g.at("lm_head.weight")).numel();
           w < end;)
        *w++ *= 20;
    const train::Loader loader = make_loader(c);
    AnalysisSettings s;
    s.batches = 2;
    const Json r = logit_lens(*m, loader, s);
    const double loss = train::evaluate(*m, loader, 2).loss;
    EXPECT_DOUBLE_EQ(r.at("model_loss").get<double>(), loss) << placement;
    ASSERT_EQ(r.at("loss").size(), 3u) << r.dump();
    EXPECT_NEAR(r["loss"][2].get<double>(), loss, 1e-6 * loss) << placement << ": " << r.dump();
    EXPECT_EQ(r["top1_agreement"][2].get<double>(), 1.0) << placement;
    EXPECT_GT(std::abs(r["loss"][0].get<double>() - loss), 1e-3) << placement << ": the embedding is not the output";
    for (size_t l = 0; l < 3; ++l) {
      EXPECT_GE(r["top1_accuracy"][l].get<double>(), 0.0);
      EXPECT_LE(r["top1_agreement"][l].get<double>(), 1.0);
    }
  }
}

}  // namespace
}  // namespace normlab::analysis

namespace normlab::analysis {
namespace {

// `normlab probe --analysis` reads its names from the one table: an unknown name is refused listing every entry, and
// the memory estimate and help come from the same entries.
TEST(AnalysisTable, AnUnknownNameIsRefusedListingTheTable) {
  try {
    parse_analyses("grad-init,nope");
    FAIL() << "an unknown analysis was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown analysis 'nope'"), std::string::npos) << message;
    for (const Analysis& a : all_analyses()) EXPECT_NE(message.find(std::string(a.name)), std::string::npos) << a.name;
  }
  // One spelling per entry, with its alias listed beside it: both select the entry, whose records keep its name.
  ASSERT_EQ(parse_analyses("angular-distance").size(), 1u);
  EXPECT_EQ(parse_analyses("angular-distance")[0], parse_analyses("angular")[0]);
  try {
    parse_analyses("logit-lenses");
    FAIL() << "an unknown analysis was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("angular (also: angular-distance)"), std::string::npos) << e.what();
  }
  const std::vector<const Analysis*> both = parse_analyses("one-step,norm-equivalence");
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0]->name, "one-step");
  EXPECT_TRUE(memory_needs("one-step").optimizer);
  EXPECT_EQ(memory_needs("grad-init,norm-equivalence").extra_models, 6);
  const std::string help = analyses_help();
  for (const Analysis& a : all_analyses()) EXPECT_NE(help.find(fmt::format("  {:<18} ", a.name)), std::string::npos);
}

}  // namespace
}  // namespace normlab::analysis
