// Exact identities between placements and inside them: Pre-LN ≡ Pre-RMSNorm ≡ Pre-CRMSNorm (after the
// §1.3 weight conversion), GPAS's scaled forward and unscaled backward, ReZero's identity map at
// init, LNS's 1/√ℓ, and Mix-LN's assignment of Post-LN to the first ⌊ρL⌋ layers.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/crms_convert.h"
#include "model/generic_weights.h"
#include "model/init.h"
#include "model/placement.h"
#include "model/transformer.h"

namespace normlab::model {
namespace {

namespace eng = normlab::engine;

constexpr int kBatch = 2, kSeq = 7, kVocab = 29;

Json small(const std::string& placement, const Json& extra = Json::object()) {
  Json j{{"vocab_size", kVocab}, {"d_model", 16},       {"n_heads", 4},          {"n_layers", 3},
         {"d_ff", 24},           {"max_seq_len", kSeq}, {"placement", placement}};
  j.merge_patch(extra);
  return j;
}

std::unique_ptr<Model> build(const Json& config, eng::DType dtype) {
  auto m = build_model(read_model_config(config, "equivalence"), kBatch, kSeq, dtype);
  std::vector<int32_t> tokens(kBatch * kSeq), targets(kBatch * kSeq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 11 + 2) % kVocab);
    targets[i] = static_cast<int32_t>((i * 5 + 7) % kVocab);
  }
  if (m->config.encoder_decoder()) {  // a padded source: row 0 has 4 of kSeq positions
    std::vector<int32_t> source(kBatch * kSeq), lengths{4, kSeq};
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<int32_t>((i * 7 + 3) % kVocab);
    m->set_source(source.data(), lengths.data());
  }
  m->set_batch(tokens.data(), targets.data());
  return m;
}

std::vector<double> values(const eng::Graph& g, eng::TensorId id, bool grad = false) {
  return eng::to_f64(g, id, grad);
}

void copy_weights(const Model& from, Model& to) {
  ASSERT_EQ(from.graph.parameters().size(), to.graph.parameters().size());
  for (eng::TensorId id : from.graph.parameters()) {
    const std::string& name = from.graph.spec(id).name;
    const eng::TensorId dst = to.graph.find(name);
    ASSERT_NE(dst, eng::kNoTensor) << name;
    ASSERT_EQ(to.graph.shape(dst), from.graph.shape(id)) << name;
    set_values(to.graph, dst, values(from.graph, id));
  }
}

// max |a − b| / max(max |b|, 1)
double max_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff = std::max(diff, std::abs(a[i] - b[i])), scale = std::max(scale, std::abs(b[i]));
  return diff / scale;
}

void run(Model& m, bool backward) {
  m.graph.zero_param_grads();
  m.forward(false);
  if (backward) m.graph.backward(m.loss);
}

// ---------------------------------------------------------------------------------------------
// (a) Pre-LN with bias-free LayerNorm ≡ Pre-RMSNorm with a zero-mean main branch (same weights).

const std::vector<Json>& prenorm_shapes() {
  static const std::vector<Json> shapes = {
      Json::object(),
      {{"activation", "swiglu"}, {"positions", "rope"}, {"bias", false}, {"tied_embeddings", false}},
      {{"activation", "geglu"},
       {"embed_scale", "learned"},
       {"options", {{"attn_softcap", 3.0}, {"final_softcap", 4.0}}}},
      // An encoder-decoder: cross-attention's k and v read the encoder's final norm (its gains fold into them).
      {{"shape", "encoder_decoder"}, {"encoder_layers", 2}, {"activation", "swiglu"}, {"embed_scale", "learned"}},
  };
  return shapes;
}

TEST(Equivalence, PreLnEqualsPreRmsLogitsLossAndGradients) {
  for (const Json& extra : prenorm_shapes()) {
    SCOPED_TRACE(extra.dump());
    for (eng::DType dtype : {eng::DType::f64, eng::DType::f32}) {
      const bool f64 = dtype == eng::DType::f64;
      Json ln = small("pre", extra);
      ln["norm"] = {{"type", "layernorm"}, {"bias", false}};
      auto pre = build(ln, dtype);
      auto rms = build(small("pre_rms", extra), dtype);
      init_generic(*pre, 3);
      copy_weights(*pre, *rms);
      run(*pre, true);
      run(*rms, true);
      const double tol = f64 ? 1e-12 : 1e-5;
      EXPECT_LE(max_error(values(rms->graph, rms->logits), values(pre->graph, pre->logits)), tol) << "logits";
      EXPECT_NEAR(rms->loss_value(), pre->loss_value(), tol * std::abs(pre->loss_value())) << "loss";
      // L is invariant to a shift of the stream along 1 in Pre-LN, so ∂L/∂stream ⊥ 1 and the
      // centering in Pre-RMSNorm changes no gradient either.
      for (eng::TensorId id : pre->graph.parameters()) {
        const std::string& name = pre->graph.spec(id).name;
        const auto want = values(pre->graph, id, true), got = values(rms->graph, rms->graph.at(name), true);
        double diff2 = 0, ref2 = 0;
        for (size_t i = 0; i < want.size(); ++i)
          diff2 += (got[i] - want[i]) * (got[i] - want[i]), ref2 += want[i] * want[i];
        if (name.ends_with(".k.bias") && extra.value("positions", "learned") != "rope") {
          // Softmax ignores a shift of all scores of a row: the key bias's exact gradient is 0, so
          // both are rounding noise.
          EXPECT_LE(std::sqrt(diff2), f64 ? 1e-12 : 1e-5) << name;
          continue;
        }
        EXPECT_LE(std::sqrt(diff2 / ref2), f64 ? 1e-10 : 2e-4) << "gradient of " << name;
      }
    }
  }
}

// The identity needs the zero-mean branch: a plain Pre-RMSNorm model (rmsnorm on "pre") differs.
TEST(Equivalence, PreLnDiffersFromUncenteredRmsNorm) {
  Json ln = small("pre");
  ln["norm"] = {{"type", "layernorm"}, {"bias", false}};
  Json rms = small("pre");
  rms["norm"] = {{"type", "rmsnorm"}};
  auto a = build(ln, eng::DType::f64), b = build(rms, eng::DType::f64);
  init_generic(*a, 3);
  copy_weights(*a, *b);
  run(*a, false);
  run(*b, false);
  EXPECT_GT(max_error(values(b->graph, b->logits), values(a->graph, a->logits)), 1e-3);
}

// ---------------------------------------------------------------------------------------------
// (b) Pre-LN ≡ Pre-CRMSNorm after model::convert_pre_ln_to_crms.

TEST(Equivalence, PreLnEqualsPreCrmsAfterConversion) {
  for (const Json& extra : prenorm_shapes()) {
    SCOPED_TRACE(extra.dump());
    for (eng::DType dtype : {eng::DType::f64, eng::DType::f32}) {
      const bool f64 = dtype == eng::DType::f64;
      Json ln = small("pre", extra);
      ln["norm"] = {{"type", "layernorm"}, {"bias", false}};
      ln["tied_embeddings"] = false;
      auto pre = build(ln, dtype);
      init_generic(*pre, 5);
      const ModelConfig target = crms_config_for(pre->config);
      EXPECT_EQ(target.placement, "pre_crms");
      EXPECT_EQ(target.stream_width(), 15);
      auto crms = build_model(target, kBatch, kSeq, dtype);
      crms->set_batch(pre->graph.data<int32_t>(pre->tokens), pre->graph.data<int32_t>(pre->targets));
      if (pre->config.encoder_decoder())
        crms->set_source(pre->graph.data<int32_t>(pre->source), pre->graph.data<int32_t>(pre->source_lengths));
      convert_pre_ln_to_crms(*pre, *crms);
      run(*pre, false);
      run(*crms, false);
      const double tol = f64 ? 1e-12 : 1e-5;
      EXPECT_LE(max_error(values(crms->graph, crms->logits), values(pre->graph, pre->logits)), tol) << "logits";
      EXPECT_NEAR(crms->loss_value(), pre->loss_value(), tol * std::abs(pre->loss_value())) << "loss";
      // The stream really is the compressed, centered Pre-LN stream: its width is d − 1, and the
      // first d − 1 coordinates of the centered Pre-LN stream after the last layer equal it.
      const std::string last =
          fmt::format("{}layers.{}.ffn.residual", pre->config.encoder_decoder() ? "decoder." : "", 2);
      const auto z = values(pre->graph, pre->graph.at(last)), x = values(crms->graph, crms->graph.at(last));
      ASSERT_EQ(x.size() / 15, z.size() / 16);
      double err = 0, scale = 1;
      for (size_t r = 0; r < z.size() / 16; ++r) {
        double mean = 0;
        for (size_t j = 0; j < 16; ++j) mean += z[r * 16 + j] / 16;
        for (size_t j = 0; j < 15; ++j)
          err = std::max(err, std::abs(x[r * 15 + j] - (z[r * 16 + j] - mean))),
          scale = std::max(scale, std::abs(z[r * 16 + j]));
      }
      EXPECT_LE(err / scale, f64 ? 1e-12 : 1e-5) << "compressed stream";
    }
  }
}

// init.from_pre_ln: a Pre-CRMSNorm model drawn this way starts as exactly the Pre-LN model of the same seed.
TEST(Equivalence, PreCrmsFromPreLnStartsAsThePreLnInitOfItsSeed) {
  Json ln = small("pre");
  ln["norm"] = {{"type", "layernorm"}, {"bias", false}};
  ln["tied_embeddings"] = false;
  Json converted = small("pre_crms", {{"tied_embeddings", false}, {"init", {{"from_pre_ln", true}}}});
  EXPECT_EQ(to_json(pre_ln_config_for(read_model_config(converted, "test"))), to_json(read_model_config(ln, "test")));
  auto pre = build(ln, eng::DType::f64), crms = build(converted, eng::DType::f64);
  initialize(*pre, 9);
  initialize(*crms, 9);
  run(*pre, false);
  run(*crms, false);
  EXPECT_LE(max_error(values(crms->graph, crms->logits), values(pre->graph, pre->logits)), 1e-12);
  Json own = converted;
  own["init"].erase("from_pre_ln");
  auto drawn = build(own, eng::DType::f64);
  initialize(*drawn, 9);
  run(*drawn, false);
  EXPECT_GT(max_error(values(drawn->graph, drawn->logits), values(pre->graph, pre->logits)), 1e-3)
      << "its own init is another function";
  EXPECT_THROW(read_model_config(small("pre", {{"init", {{"from_pre_ln", true}}}}), "test"), Error);
}

TEST(Equivalence, CrmsConversionRejectsModelsItCannotConvert) {
  auto expect_error = [](const Json& config, const std::string& fragment) {
    auto m = build(config, eng::DType::f64);
    try {
      const ModelConfig target = crms_config_for(m->config);
      auto crms = build_model(target, kBatch, kSeq, eng::DType::f64);
      convert_pre_ln_to_crms(*m, *crms);
      ADD_FAILURE() << "no error for " << config.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  Json base = small("pre");
  base["norm"] = {{"type", "layernorm"}, {"bias", false}};
  base["tied_embeddings"] = false;
  Json tied = base, with_bias = base, rms = base, qk = base;
  tied["tied_embeddings"] = true;
  with_bias["norm"]["bias"] = true;
  rms["norm"] = {{"type", "rmsnorm"}};
  qk["options"] = {{"qk_norm", "full"}};
  expect_error(tied, "tied_embeddings");
  expect_error(with_bias, "norm.bias");
  expect_error(rms, "layernorm");
  expect_error(qk, "qk_norm");
  expect_error(small("peri"), "a plain Pre-LN placement ('pre')");

  // A target that is not the source's Pre-CRMSNorm form.
  auto pre = build(base, eng::DType::f64);
  Json wrong = to_json(crms_config_for(pre->config));
  wrong["d_ff"] = 20;
  auto crms = build(wrong, eng::DType::f64);
  try {
    convert_pre_ln_to_crms(*pre, *crms);
    ADD_FAILURE() << "no error for a target with another d_ff";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("d_ff"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// (c) GPAS: forward (1 − SiLU(a))·(x + F(Norm x)), backward unscaled.

TEST(Equivalence, GpasForwardScalesTheStreamAndBackwardPassesThroughUnscaled) {
  auto m = build(small("gpas"), eng::DType::f64);
  init_generic(*m, 9);
  const double gates[] = {0.8, -0.5, 1.1};
  for (int i = 0; i < 3; ++i) set_values(m->graph, m->graph.at(fmt::format("layers.{}.gpas_gate", i)), {gates[i]});
  run(*m, true);
  const eng::Graph& g = m->graph;
  for (int i = 0; i < 3; ++i) {
    const double a = gates[i], keep = 1 - a / (1 + std::exp(-a));
    for (const char* s : {"attn", "ffn"}) {
      SCOPED_TRACE(fmt::format("layers.{}.{}", i, s));
      const eng::TensorId residual = g.at(fmt::format("layers.{}.{}.residual", i, s));
      const eng::TensorId gated = g.at(fmt::format("layers.{}.{}.gated", i, s));
      // residual = x + F(Norm x): the add node's two inputs are the block input and the branch.
      for (const eng::Node& n : g.nodes())
        if (n.out == residual) {
          const auto x = values(g, n.in[0]), f = values(g, n.in[1]), r = values(g, residual);
          for (size_t k = 0; k < r.size(); ++k) ASSERT_NEAR(r[k], x[k] + f[k], 1e-14 * (1 + std::abs(r[k])));
          // ... and the block input is the previous gate's output (or the embedding).
          const std::string prev = std::string(s) == "ffn" ? fmt::format("layers.{}.attn.gated", i)
                                   : i > 0                 ? fmt::format("layers.{}.ffn.gated", i - 1)
                                                           : std::string("embed.out");
          EXPECT_EQ(n.in[0], g.at(prev));
        }
      const auto r = values(g, residual), y = values(g, gated);
      for (size_t k = 0; k < r.size(); ++k) ASSERT_NEAR(y[k], keep * r[k], 1e-14 * (1 + std::abs(r[k])));
      // ∂L/∂(x + F) = ∂L/∂G(x + F): the gradient is not multiplied by (1 − SiLU(a)).
      const auto dr = values(g, residual, true), dy = values(g, gated, true);
      double norm = 0;
      for (size_t k = 0; k < r.size(); ++k) {
        ASSERT_EQ(dr[k], dy[k]);
        norm += dy[k] * dy[k];
      }
      EXPECT_GT(norm, 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// (d) ReZero at init is the identity map.

TEST(Equivalence, ReZeroAtInitIsTheIdentityMap) {
  for (bool per_sublayer : {false, true}) {
    SCOPED_TRACE(per_sublayer ? "per sub-layer α" : "one α per layer");
    auto m = build(small("rezero", {{"options", {{"rezero_per_sublayer", per_sublayer}}}}), eng::DType::f32);
    initialize(*m, 4);
    run(*m, false);
    const eng::Graph& g = m->graph;
    const auto embedded = values(g, g.at("embed.out"));
    for (int i = 0; i < 3; ++i)
      for (const char* s : {"attn", "ffn"}) {
        const std::string name = fmt::format("layers.{}.{}.residual", i, s);
        EXPECT_EQ(values(g, g.at(name)), embedded) << name;
        // ... while the branch itself is not zero (the identity comes from α, not from a dead branch).
        for (const eng::Node& n : g.nodes())
          if (n.out == g.at(name)) {
            double norm = 0;
            for (double v : values(g, n.in[1])) norm += v * v;
            EXPECT_GT(norm, 0) << name;
          }
      }
    const std::string alpha = per_sublayer ? "layers.0.ffn.rezero_alpha" : "layers.0.rezero_alpha";
    EXPECT_EQ(values(g, g.at(alpha)), std::vector<double>{0.0});
  }
}

// ---------------------------------------------------------------------------------------------
// (e) LayerNorm Scaling: the branch input is Norm(h)·1/√ℓ exactly; gain_init starts γ at 1/√ℓ.

TEST(Equivalence, LnsScalesEachBranchInputByOneOverSqrtDepth) {
  auto m = build(small("lns", {{"n_layers", 4}}), eng::DType::f32);
  init_generic(*m, 6);
  run(*m, false);
  const eng::Graph& g = m->graph;
  for (int i = 0; i < 4; ++i)
    for (const char* s : {"attn", "ffn"}) {
      const std::string p = fmt::format("layers.{}.{}", i, s);
      const float factor = static_cast<float>(1.0 / std::sqrt(static_cast<double>(i + 1)));
      const float* normed = g.data<float>(g.at(p + ".in_norm.out"));
      const float* scaled = g.data<float>(g.at(p + ".lns_scaled"));
      for (int64_t k = 0; k < g.shape(g.at(p + ".lns_scaled")).numel(); ++k)
        ASSERT_EQ(scaled[k], factor * normed[k]) << p;
      // The scaled tensor is what the branch reads: q's input.
      for (const eng::Node& n : g.nodes()) {
        if (n.out == g.at(p + (s == std::string("attn") ? ".q.out" : ".fc1.out"))) {
          EXPECT_EQ(n.in[0], g.at(p + ".lns_scaled")) << p;
        }
      }
    }
  EXPECT_EQ(g.find("final_norm.lns_scaled"), eng::kNoTensor);
  EXPECT_NE(g.find("final_norm.weight"), eng::kNoTensor);
}

TEST(Equivalence, LnsGainInitStartsGainsAtOneOverSqrtDepthWithoutAConstant) {
  auto m = build(small("lns", {{"n_layers", 4}, {"options", {{"lns_form", "gain_init"}}}}), eng::DType::f32);
  initialize(*m, 6);
  const eng::Graph& g = m->graph;
  for (int i = 0; i < 4; ++i)
    for (const char* s : {"attn", "ffn"}) {
      const std::string p = fmt::format("layers.{}.{}", i, s);
      const auto gain = values(g, g.at(p + ".in_norm.weight"));
      for (double v : gain) EXPECT_EQ(v, static_cast<double>(static_cast<float>(1 / std::sqrt(i + 1.0)))) << p;
      EXPECT_EQ(g.find(p + ".lns_scaled"), eng::kNoTensor) << p;
    }
  for (double v : values(g, g.at("final_norm.weight"))) EXPECT_EQ(v, 1.0);
  // Same forward value at init as the constant form.
  auto c = build(small("lns", {{"n_layers", 4}}), eng::DType::f64);
  auto gi = build(small("lns", {{"n_layers", 4}, {"options", {{"lns_form", "gain_init"}}}}), eng::DType::f64);
  initialize(*c, 6);
  initialize(*gi, 6);
  run(*c, false);
  run(*gi, false);
  EXPECT_LE(max_error(values(gi->graph, gi->logits), values(c->graph, c->logits)), 1e-13);
}

// ---------------------------------------------------------------------------------------------
// (f) Mix-LN: Post-LN on the first ⌊ρL⌋ layers, Pre-LN on the rest.

TEST(VariantStructure, MixLnAssignsPostLnToTheFirstFloorRhoLLayers) {
  for (int layers : {4, 8, 12})
    for (double rho : {0.25, 0.5}) {
      const int post = static_cast<int>(std::floor(rho * layers));
      Json c{{"vocab_size", 11}, {"d_model", 8},     {"n_heads", 2},         {"n_layers", layers},
             {"d_ff", 8},        {"max_seq_len", 4}, {"placement", "mixln"}, {"options", {{"mixln_ratio", rho}}}};
      auto m = build_model(read_model_config(c, "mixln"), 1, 4, eng::DType::f32);
      const eng::Graph& g = m->graph;
      int seen_post = 0;
      for (int i = 0; i < layers; ++i)
        for (const char* s : {"attn", "ffn"}) {
          const std::string p = fmt::format("layers.{}.{}", i, s);
          const bool has_post = g.find(p + ".post_norm.weight") != eng::kNoTensor;
          const bool has_in = g.find(p + ".in_norm.weight") != eng::kNoTensor;
          EXPECT_EQ(has_post, i < post) << p << " L=" << layers << " ρ=" << rho;
          EXPECT_EQ(has_in, i >= post) << p << " L=" << layers << " ρ=" << rho;
          seen_post += has_post;
        }
      EXPECT_EQ(seen_post, 2 * post);
      EXPECT_NE(g.find("final_norm.weight"), eng::kNoTensor);
    }
}

}  // namespace
}  // namespace normlab::model
