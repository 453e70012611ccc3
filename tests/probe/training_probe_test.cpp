// TrainingProbe (src/probe/training_probe.h) against explicit computations on the graph's buffers:
// gradient norms, stream statistics, update norms and ratios, learnable scalars and the model-update
// measure; and the promise that reading them changes nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "probe/training_probe.h"
#include "probe_test_util.h"
#include "train/adamw.h"
#include "train/trainer.h"

namespace normlab::probe {
namespace {

namespace eng = normlab::engine;
using namespace testing;

// A model after forward + backward on step 1's batch: what TrainingProbe::after_backward sees.
struct Stepped {
  train::RunConfig config;
  std::unique_ptr<model::Model> m;
  train::Batch batch, reference;
  double loss = 0;
  explicit Stepped(const json& model_section, engine::DType dtype = engine::DType::f32)
      : config(tiny_run(model_section)), m(fresh_model(config, dtype)) {
    const train::Loader loader = make_loader(config);
    loader.train_batch(1, 0, batch);
    loader.eval_batch(0, 1, reference);
    backward();
  }
  void backward() {
    m->set_batch(batch.tokens.data(), batch.targets.data());
    m->graph.zero_param_grads();
    loss = m->forward(true);
    m->graph.backward(m->loss);
  }
};

bool near(double a, double b, double rel = 1e-12) { return std::abs(a - b) <= rel * std::max(std::abs(b), 1e-300); }

// Every buffer of every tensor (data and gradient), to check that probing leaves them untouched.
std::vector<std::string> snapshot(const eng::Graph& g) {
  std::vector<std::string> out;
  for (size_t i = 0; i < g.tensor_count(); ++i) {
    const auto id = static_cast<eng::TensorId>(i);
    out.push_back(raw_bytes(g, id));
    out.push_back(raw_bytes(g, id, true));
  }
  return out;
}

TEST(ProbeTraining, GradientNormsEqualTheGradientBuffersAndReadingThemChangesNothing) {
  Stepped s(json{{"placement", "pre"}});
  const eng::Graph& g = s.m->graph;
  const std::vector<std::string> before = snapshot(g);
  const double global = train::global_grad_norm(g);
  TempDir tmp;
  {
    TrainingProbe probe(*s.m, tmp.path(), false);
    probe.after_backward(1, s.loss, global);
  }
  EXPECT_TRUE(snapshot(g) == before) << "after_backward changed a value or a gradient";

  const auto records = read_jsonl(tmp / "probes.jsonl");
  // param: ‖W‖ and ‖∂L/∂W‖ of every parameter, in graph order.
  const auto params = family(records, "param");
  ASSERT_EQ(params.size(), 1u);
  const json& p = params[0];
  ASSERT_EQ(p.at("name").size(), g.parameters().size());
  double sum_sq = 0;
  for (size_t i = 0; i < g.parameters().size(); ++i) {
    const eng::TensorId id = g.parameters()[i];
    EXPECT_EQ(p["name"][i].get<std::string>(), g.spec(id).name);
    const double grad = l2(values(g, id, true)), weight = l2(values(g, id));
    EXPECT_TRUE(near(p["grad_norm"][i].get<double>(), grad, 1e-12))
        << g.spec(id).name << ": " << p["grad_norm"][i] << " vs " << grad;
    EXPECT_TRUE(near(p["weight_norm"][i].get<double>(), weight, 1e-12)) << g.spec(id).name;
    sum_sq += grad * grad;
  }
  // loss: the step's loss and global gradient norm, which is the norm of all parameter gradients.
  const auto loss = family(records, "loss");
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_EQ(loss[0].at("loss").get<double>(), s.loss);
  EXPECT_EQ(loss[0].at("grad_norm").get<double>(), global);
  EXPECT_TRUE(near(global, std::sqrt(sum_sq), 1e-12));

  // stream: statistics and ‖∂L/∂x‖ of the residual stream entering each layer (L + 1 entries).
  const auto streams = family(records, "stream");
  ASSERT_EQ(streams.size(), 1u);
  const json& st = streams[0];
  const auto& inputs = s.m->landmarks.layer_inputs;
  ASSERT_EQ(st.at("layer").size(), inputs.size());
  ASSERT_EQ(inputs.size(), static_cast<size_t>(s.config.model.n_layers + 1));
  for (size_t l = 0; l < inputs.size(); ++l) {
    const std::vector<double> x = values(g, inputs[l]), dx = values(g, inputs[l], true);
    double max_abs = 0;
    for (double v : x) max_abs = std::max(max_abs, std::abs(v));
    const double ms = l2(x) * l2(x) / static_cast<double>(x.size());
    EXPECT_EQ(st["layer"][l].get<size_t>(), l);
    EXPECT_TRUE(near(st["grad_norm"][l].get<double>(), l2(dx), 1e-12)) << "layer " << l;
    EXPECT_GT(l2(dx), 0.0) << "layer " << l;
    EXPECT_TRUE(near(st["mean_square"][l].get<double>(), ms, 1e-12)) << "layer " << l;
    EXPECT_TRUE(near(st["rms"][l].get<double>(), std::sqrt(ms), 1e-12)) << "layer " << l;
    EXPECT_EQ(st["max_abs"][l].get<double>(), max_abs) << "layer " << l;
  }
  // branch: RMS and max |F(·)| of each sub-layer's output.
  const auto branches = family(records, "branch");
  ASSERT_EQ(branches.size(), 1u);
  const json& br = branches[0];
  ASSERT_EQ(br.at("rms").size(), static_cast<size_t>(2 * s.config.model.n_layers));
  for (size_t i = 0; i < br["rms"].size(); ++i) {
    const size_t layer = br["layer"][i].get<size_t>(), sub = br["sublayer"][i] == "attn" ? 0 : 1;
    EXPECT_EQ(layer, i / 2);
    EXPECT_EQ(sub, i % 2);
    const std::vector<double> y = values(g, s.m->landmarks.branch_outputs[layer][sub]);
    EXPECT_TRUE(near(br["rms"][i].get<double>(), l2(y) / std::sqrt(static_cast<double>(y.size())), 1e-12)) << i;
  }
}

// ReZero at init: x_{l+1} = x_l + α·F(x_l) with α = 0, so ∂L/∂x_l = ∂L/∂x_{l+1} exactly: the stream
// gradient norm is the same at every layer (and every layer input is the same tensor value).
TEST(ProbeTraining, ReZeroAtInitHasTheSameStreamGradientAtEveryLayer) {
  Stepped s(json{{"placement", "rezero"}, {"n_layers", 3}});
  TempDir tmp;
  {
    TrainingProbe probe(*s.m, tmp.path(), false);
    probe.after_backward(1, s.loss, train::global_grad_norm(s.m->graph));
  }
  const auto streams = family(read_jsonl(tmp / "probes.jsonl"), "stream");
  ASSERT_EQ(streams.size(), 1u);
  const json& st = streams[0];
  ASSERT_EQ(st.at("grad_norm").size(), 4u);
  for (size_t l = 1; l < 4; ++l) {
    EXPECT_EQ(st["grad_norm"][l].get<double>(), st["grad_norm"][0].get<double>()) << "layer " << l;
    EXPECT_EQ(st["mean_square"][l].get<double>(), st["mean_square"][0].get<double>()) << "layer " << l;
  }
  EXPECT_GT(st["grad_norm"][0].get<double>(), 0.0);
  // branch outputs are α·F = 0 in the stream, but F itself (the branch output) is not.
  const auto br = family(read_jsonl(tmp / "probes.jsonl"), "branch");
  ASSERT_EQ(br.size(), 1u);
  for (const auto& r : br[0].at("rms")) EXPECT_GT(r.get<double>(), 0.0);
}

TEST(ProbeTraining, UpdateNormsAndRatiosEqualTheParameterChange) {
  Stepped s(json{{"placement", "pre"}});
  eng::Graph& g = s.m->graph;
  TempDir tmp;
  std::vector<std::vector<double>> theta0, theta1;
  {
    TrainingProbe probe(*s.m, tmp.path(), false);
    probe.set_reference(s.reference.tokens.data(), s.reference.targets.data());
    std::vector<double> logits0 = values(g, s.m->logits);  // F(x, θ_0) on the probe batch
    s.backward();
    probe.after_backward(1, s.loss, train::global_grad_norm(g));
    for (auto id : g.parameters()) theta0.push_back(values(g, id));
    train::AdamW opt(g);
    opt.step({1e-2, 0.9, 0.95, 1e-8, 0.1}, 1.0, 1);
    for (auto id : g.parameters()) theta1.push_back(values(g, id));
    probe.after_update(1);

    // model_update: RMS of F(x, θ_1) − F(x, θ_0) on the probe batch, computed here by hand.
    s.m->set_batch(s.reference.tokens.data(), s.reference.targets.data());
    s.m->forward(false);
    const std::vector<double> logits1 = values(g, s.m->logits);
    double sq = 0;
    for (size_t i = 0; i < logits1.size(); ++i) sq += (logits1[i] - logits0[i]) * (logits1[i] - logits0[i]);
    const auto mu = family(read_jsonl(tmp / "probes.jsonl"), "model_update");
    ASSERT_EQ(mu.size(), 1u);
    EXPECT_TRUE(near(mu[0].at("logit_change_rms").get<double>(), std::sqrt(sq / logits1.size()), 1e-12));
    EXPECT_GT(mu[0].at("logit_change_rms").get<double>(), 0.0);
  }
  EXPECT_TRUE(fs::exists(tmp / "probe_reference.safetensors"));

  const auto updates = family(read_jsonl(tmp / "probes.jsonl"), "update");
  ASSERT_EQ(updates.size(), 1u);
  const json& u = updates[0];
  EXPECT_EQ(u.at("step").get<int>(), 1);
  ASSERT_EQ(u.at("name").size(), g.parameters().size());
  for (size_t i = 0; i < g.parameters().size(); ++i) {
    const std::string& name = g.spec(g.parameters()[i]).name;
    std::vector<double> diff(theta0[i].size());
    for (size_t j = 0; j < diff.size(); ++j) diff[j] = theta1[i][j] - theta0[i][j];
    const double du = l2(diff), w = l2(theta0[i]);
    EXPECT_EQ(u["name"][i].get<std::string>(), name);
    EXPECT_TRUE(near(u["update_norm"][i].get<double>(), du, 1e-12))
        << name << ": " << u["update_norm"][i] << " vs " << du;
    EXPECT_GT(du, 0.0) << name;  // Adam's first step moves every weight by ≈ lr
    // ‖θ_t − θ_{t−1}‖/‖θ_{t−1}‖; a parameter that was all zeros (biases at init) reads 0.
    if (w > 0) {
      EXPECT_TRUE(near(u["update_ratio"][i].get<double>(), du / w, 1e-12)) << name;
    } else {
      EXPECT_EQ(u["update_ratio"][i].get<double>(), 0.0) << name;
    }
  }
}

// With no update between after_backward and after_update every update norm is 0, and the model's
// output on the probe batch is still F(x, θ_0): the model-update measure is exactly 0.
TEST(ProbeTraining, NoUpdateReadsZeroUpdateAndZeroModelUpdate) {
  Stepped s(json{{"placement", "post"}});
  TempDir tmp;
  {
    TrainingProbe probe(*s.m, tmp.path(), false);
    probe.set_reference(s.reference.tokens.data(), s.reference.targets.data());
    s.backward();
    probe.after_backward(1, s.loss, train::global_grad_norm(s.m->graph));
    probe.after_update(1);
  }
  const auto records = read_jsonl(tmp / "probes.jsonl");
  const auto u = family(records, "update");
  ASSERT_EQ(u.size(), 1u);
  for (const auto& v : u[0].at("update_norm")) EXPECT_EQ(v.get<double>(), 0.0);
  for (const auto& v : u[0].at("update_ratio")) EXPECT_EQ(v.get<double>(), 0.0);
  const auto mu = family(records, "model_update");
  ASSERT_EQ(mu.size(), 1u);
  EXPECT_EQ(mu[0].at("logit_change_rms").get<double>(), 0.0);
}

// scalar: every learnable scalar with its value (ReZero α, GPAS gates); none for plain Pre-LN.
TEST(ProbeTraining, ScalarFamilyListsReZeroAlphasAndGpasGatesWithTheirValues) {
  struct Case {
    json model;
    std::vector<std::string> names;
  };
  const std::vector<Case> cases = {
      {{{"placement", "rezero"}}, {"layers.0.rezero_alpha", "layers.1.rezero_alpha"}},
      {{{"placement", "rezero"}, {"options", {{"rezero_per_sublayer", true}}}},
       {"layers.0.attn.rezero_alpha", "layers.0.ffn.rezero_alpha", "layers.1.attn.rezero_alpha",
        "layers.1.ffn.rezero_alpha"}},
      {{{"placement", "gpas"}}, {"layers.0.gpas_gate", "layers.1.gpas_gate"}},
      {{{"placement", "gpas"}, {"options", {{"gpas_per_sublayer", true}}}},
       {"layers.0.attn.gpas_gate", "layers.0.ffn.gpas_gate", "layers.1.attn.gpas_gate", "layers.1.ffn.gpas_gate"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model.dump());
    Stepped s(c.model, engine::DType::f64);
    for (size_t i = 0; i < c.names.size(); ++i) model::fill_constant(*s.m, c.names[i], 0.125 * (i + 1) - 0.3);
    s.backward();
    TempDir tmp;
    {
      TrainingProbe probe(*s.m, tmp.path(), false);
      probe.after_backward(3, s.loss, train::global_grad_norm(s.m->graph));
    }
    const auto scalars = family(read_jsonl(tmp / "probes.jsonl"), "scalar");
    ASSERT_EQ(scalars.size(), 1u);
    EXPECT_EQ(scalars[0].at("step").get<int>(), 3);
    ASSERT_EQ(scalars[0].at("name").get<std::vector<std::string>>(), c.names);
    for (size_t i = 0; i < c.names.size(); ++i)
      EXPECT_EQ(scalars[0]["value"][i].get<double>(), 0.125 * (i + 1) - 0.3) << c.names[i];
  }
  Stepped pre(json{{"placement", "pre"}});
  TempDir tmp;
  {
    TrainingProbe probe(*pre.m, tmp.path(), false);
    probe.after_backward(1, pre.loss, train::global_grad_norm(pre.m->graph));
  }
  EXPECT_TRUE(family(read_jsonl(tmp / "probes.jsonl"), "scalar").empty());
}

// Through the training loop: ReZero's α starts at 0 and moves; the update record of each step is
// consistent with the next step's weight norms; the model-update measure is > 0 once weights moved,
// and exactly 0 for a run with lr = 0 (AdamW with lr 0 leaves every weight as it is).
TEST(ProbeTraining, TrainingRunRecordsScalarsUpdatesAndModelUpdate) {
  TempDir tmp;
  const train::RunConfig c = tiny_run({{"placement", "rezero"}}, {{"steps", 4}, {"probe_every", 1}});
  train::Trainer(c, tmp / "run", {}).run();
  const auto records = read_jsonl(tmp / "run" / "probes.jsonl");
  const auto scalars = family(records, "scalar"), params = family(records, "param"),
             updates = family(records, "update"), mu = family(records, "model_update");
  ASSERT_EQ(scalars.size(), 4u);
  ASSERT_EQ(params.size(), 4u);
  ASSERT_EQ(updates.size(), 4u);
  ASSERT_EQ(mu.size(), 4u);
  for (const auto& v : scalars[0].at("value"))
    EXPECT_EQ(v.get<double>(), 0.0) << "α at step 1, before the first update";
  for (const auto& v : scalars[1].at("value")) EXPECT_NE(v.get<double>(), 0.0) << "α after one update";
  for (size_t s = 0; s < 4; ++s) {
    EXPECT_EQ(mu[s].at("step").get<int>(), static_cast<int>(s + 1));
    EXPECT_GT(mu[s].at("logit_change_rms").get<double>(), 0.0) << "step " << s + 1;
    // update_ratio · ‖θ_{t−1}‖ = update_norm, with ‖θ_{t−1}‖ the param record of the same step.
    for (size_t i = 0; i < updates[s]["name"].size(); ++i) {
      const double w = params[s]["weight_norm"][i].get<double>(), du = updates[s]["update_norm"][i].get<double>();
      if (w > 0) {
        EXPECT_TRUE(near(updates[s]["update_ratio"][i].get<double>() * w, du, 1e-9)) << updates[s]["name"][i];
      }
    }
    // The scalar record is the param record's view of the scalars: same values, as means.
    for (size_t k = 0; k < scalars[s]["name"].size(); ++k) {
      const size_t i = index_of(params[s], scalars[s]["name"][k].get<std::string>());
      EXPECT_EQ(std::abs(scalars[s]["value"][k].get<double>()), params[s]["weight_norm"][i].get<double>());
    }
  }

  const train::RunConfig frozen = tiny_run({{"placement", "pre"}}, {{"steps", 3}, {"probe_every", 1}, {"lr", 0.0}});
  train::Trainer(frozen, tmp / "frozen", {}).run();
  const auto still = read_jsonl(tmp / "frozen" / "probes.jsonl");
  ASSERT_EQ(family(still, "model_update").size(), 3u);
  for (const auto& r : family(still, "model_update")) EXPECT_EQ(r.at("logit_change_rms").get<double>(), 0.0);
  for (const auto& r : family(still, "update"))
    for (const auto& v : r.at("update_norm")) EXPECT_EQ(v.get<double>(), 0.0);
}

}  // namespace
}  // namespace normlab::probe
