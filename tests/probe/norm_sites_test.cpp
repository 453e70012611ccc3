// The `norm` probe (src/probe/norm_sites.h): every norm on the tape is found by op kind and read as
// the mean over rows of its 1/σ. A norm whose input is scaled by c has its 1/σ divided by c (the
// Jacobian scale, Xiong et al. 2020 Lemma 3), and the DeepNet input size ‖x‖/√d is multiplied by c.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/ops.h"
#include "probe/norm_sites.h"
#include "probe_test_util.h"

namespace normlab::probe {
namespace {

namespace eng = normlab::engine;
using eng::DType;
using eng::Role;
using eng::Shape;
using eng::TensorId;
using namespace testing;

constexpr int64_t kRows = 6, kWidth = 16;
constexpr double kEps = 1e-12;  // ≈ 0 next to the inputs' O(1) variance, so the scaling law is exact to ~1e-12
constexpr double kScaleGain = 3.0, kDytAlpha = 0.7;

// One input x [6, 16] (f64) feeding LayerNorm, RMSNorm, ScaleNorm, CRMSNorm, DyT and a QKNorm-style
// plain L2 step (named *.l2, which the probe skips: it has no scale to read).
struct NormGraph {
  eng::Graph g{DType::f64};
  TensorId x;
  NormGraph() {
    x = g.input("x", Shape{kRows, kWidth}, DType::f64);
    TensorId ln_w = g.parameter("ln.weight", Shape{kWidth}, Role::norm_gain, false, 1.0);
    TensorId ln_b = g.parameter("ln.bias", Shape{kWidth}, Role::norm_bias, false);
    eng::layer_norm(g, "ln.out", x, ln_w, ln_b, kEps);
    TensorId rms_w = g.parameter("rms.weight", Shape{kWidth}, Role::norm_gain, false, 1.0);
    eng::rms_norm(g, "rms.out", x, rms_w, kEps);
    TensorId sn_g = g.parameter("sn.weight", Shape{1}, Role::scalar, false, kScaleGain);
    eng::scale_norm(g, "sn.out", x, sn_g, kEps);
    eng::crms_norm(g, "crms.out", x, kEps);
    eng::scale_norm(g, "attn.q.l2", x, eng::kNoTensor, kEps);
    TensorId alpha = g.parameter("dyt.alpha", Shape{1}, Role::scalar, false, kDytAlpha);
    TensorId dyt_w = g.parameter("dyt.weight", Shape{kWidth}, Role::norm_gain, false, 1.0);
    eng::dyt(g, "dyt.out", x, alpha, dyt_w, eng::kNoTensor);
    g.plan();
    for (TensorId p : g.parameters()) {
      double* d = g.data<double>(p);
      for (int64_t i = 0; i < g.shape(p).numel(); ++i) d[i] = g.spec(p).init_value;
    }
  }
  // x = c · (a fixed pattern with nonzero mean per row), then a forward pass.
  void run(double c) {
    double* d = g.data<double>(x);
    Rng rng(7);
    for (int64_t i = 0; i < kRows * kWidth; ++i) d[i] = c * (0.3 * static_cast<double>(i / kWidth) + rng.normal());
    g.forward(false);
  }
  std::vector<double> row(int64_t r) const {
    const double* d = g.data<double>(x);
    return {d + r * kWidth, d + (r + 1) * kWidth};
  }
};

std::map<std::string, NormReading> read_all(const eng::Graph& g) {
  std::map<std::string, NormReading> out;
  for (const NormSite& s : norm_sites(g)) out[s.name] = read_norm(g, s);
  return out;
}

TEST(ProbeNorms, SitesAreEveryNormOnTheTapeNamedByTheirPrefix) {
  NormGraph n;
  const std::vector<NormSite> sites = norm_sites(n.g);
  std::vector<std::string> names;
  for (const auto& s : sites) {
    names.push_back(s.name);
    EXPECT_EQ(n.g.spec(n.g.nodes()[static_cast<size_t>(s.node)].out).name, s.name + ".out");
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ln", "rms", "sn", "crms", "dyt"}));  // tape order; *.l2 skipped
}

TEST(ProbeNorms, ReadingsEqualTheDefinitionsComputedByHand) {
  NormGraph n;
  n.run(1.0);
  double ln = 0, rms = 0, sn = 0, crms = 0, input_rms = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    const std::vector<double> x = n.row(r);
    double sum = 0, sq = 0;
    for (double v : x) sum += v, sq += v * v;
    const double mean = sum / kWidth;
    double var = 0;
    for (double v : x) var += (v - mean) * (v - mean) / kWidth;
    ln += 1 / std::sqrt(var + kEps) / kRows;
    rms += 1 / std::sqrt(sq / kWidth + kEps) / kRows;
    sn += kScaleGain / std::sqrt(sq) / kRows;
    crms += 1 / std::sqrt((sq + sum * sum) / (kWidth + 1) + kEps) / kRows;
    input_rms += std::sqrt(sq / kWidth) / kRows;
  }
  auto got = read_all(n.g);
  EXPECT_NEAR(got["ln"].inv_sigma, ln, 1e-12 * ln);
  EXPECT_NEAR(got["rms"].inv_sigma, rms, 1e-12 * rms);
  EXPECT_NEAR(got["sn"].inv_sigma, sn, 1e-12 * sn);
  EXPECT_NEAR(got["crms"].inv_sigma, crms, 1e-12 * crms);
  EXPECT_EQ(got["dyt"].inv_sigma, kDytAlpha);
  for (const auto& [name, r] : got) EXPECT_NEAR(r.input_rms, input_rms, 1e-12 * input_rms) << name;
}

TEST(ProbeNorms, ScalingTheInputByCDividesOneOverSigmaByC) {
  NormGraph n;
  n.run(1.0);
  const auto base = read_all(n.g);
  for (double c : {8.0, 0.37, 1000.0}) {
    n.run(c);
    const auto scaled = read_all(n.g);
    for (const char* name : {"ln", "rms", "sn", "crms"})
      EXPECT_NEAR(scaled.at(name).inv_sigma * c / base.at(name).inv_sigma, 1.0, 1e-9) << name << ", c = " << c;
    // DyT has no σ: its reading is α, whatever the input's scale.
    EXPECT_EQ(scaled.at("dyt").inv_sigma, base.at("dyt").inv_sigma) << "c = " << c;
    for (const auto& [name, r] : scaled)
      EXPECT_NEAR(r.input_rms / (c * base.at(name).input_rms), 1.0, 1e-12) << name << ", c = " << c;
  }
}

// The same law inside a model: in Pre-LN with RoPE (no position table) the first norm reads the token
// embeddings, so scaling the embedding table by c divides that norm's 1/σ by c. (Later norms see
// x + F(x) with branches that do not scale along, so only the first one has a known answer.)
TEST(ProbeNorms, ScalingTheEmbeddingsDividesTheFirstPreLnNormsOneOverSigma) {
  const train::RunConfig cfg = tiny_run({{"placement", "pre"}, {"positions", "rope"}, {"init", {{"embed_std", 1.0}}}});
  auto m = fresh_model(cfg, DType::f64);
  const train::Loader loader = make_loader(cfg);
  train::Batch batch;
  loader.train_batch(1, 0, batch);
  m->set_batch(batch.tokens.data(), batch.targets.data());
  m->forward(true);

  std::vector<std::string> names;
  for (const auto& s : norm_sites(m->graph)) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"layers.0.attn.in_norm", "layers.0.ffn.in_norm", "layers.1.attn.in_norm",
                                             "layers.1.ffn.in_norm", "final_norm"}));
  const NormReading before = read_all(m->graph).at("layers.0.attn.in_norm");
  const double c = 5.0;
  model::scale_roles(*m, {Role::embedding}, c);
  m->forward(true);
  const NormReading after = read_all(m->graph).at("layers.0.attn.in_norm");
  // LayerNorm ε = 1e-5 against a per-row variance of ~1: the law holds up to ε/(2σ²) ≈ 5e-6.
  EXPECT_NEAR(after.inv_sigma * c / before.inv_sigma, 1.0, 2e-5);
  EXPECT_NEAR(after.input_rms / before.input_rms, c, 1e-9 * c);
}

}  // namespace
}  // namespace normlab::probe
