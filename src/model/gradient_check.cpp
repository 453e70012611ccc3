#include "model/gradient_check.h"

#include <omp.h>

#include <cmath>

#include "common/rng.h"
#include "model/init.h"

namespace normlab::model {

namespace eng = normlab::engine;

namespace {

constexpr int kBatch = 2, kSeq = 5, kVocab = 13;

void set_tokens(Model& m) {
  std::vector<int32_t> tokens(kBatch * kSeq), targets(kBatch * kSeq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 5 + 1) % kVocab);
    targets[i] = static_cast<int32_t>((i * 7 + 3) % kVocab);
    if (m.config.encoder() && i % 3 == 1) targets[i] = -1;  // a masked LM predicts only the masked positions
  }
  if (m.config.encoder_decoder()) {  // a padded source (row 0: 3 of 5 positions) and a padded target
    std::vector<int32_t> source(kBatch * kSeq), lengths{3, kSeq};
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<int32_t>((i * 3 + 2) % kVocab);
    targets[kSeq - 1] = -1;
    m.set_source(source.data(), lengths.data());
  }
  m.set_batch(tokens.data(), targets.data());
}

double loss_of(Model& m) {
  m.graph.forward(true);
  return *m.graph.data<double>(m.loss);
}

}  // namespace

Json gradient_check_section() {
  return Json{{"vocab_size", kVocab}, {"d_model", 8}, {"n_heads", 2},
              {"n_layers", 2},        {"d_ff", 12},   {"max_seq_len", kSeq}};
}

std::unique_ptr<Model> gradient_check_model(const ModelConfig& config, uint64_t seed, uint64_t noise_seed) {
  auto m = build_model(config, kBatch, kSeq, eng::DType::f64);
  set_tokens(*m);
  initialize(*m, seed);
  for (eng::TensorId id : m->graph.parameters()) {
    Rng rng(hash_string(m->graph.spec(id).name, noise_seed));
    double* d = m->graph.data<double>(id);
    for (int64_t i = 0; i < m->graph.shape(id).numel(); ++i) d[i] += 0.3 * rng.normal();
  }
  return m;
}

bool GradientComparison::agrees(double tolerance) const {
  return difference_norm <= tolerance * numeric_norm + 1e-9 * std::sqrt(static_cast<double>(sampled));
}

std::vector<GradientComparison> compare_gradients(Model& m, const std::function<bool(const std::string&)>& select,
                                                  int64_t max_entries, double h) {
  if (m.graph.float_type() != eng::DType::f64) fail("internal: a gradient check needs an fp64 model");
  OneThread one_thread;
  eng::Graph& g = m.graph;
  g.zero_param_grads();
  g.forward(true);
  g.backward(m.loss);
  std::vector<GradientComparison> out;
  for (eng::TensorId id : g.parameters()) {
    const eng::TensorSpec& spec = g.spec(id);
    if (select && !select(spec.name)) continue;
    double* w = g.data<double>(id);
    const double* analytic = g.grad<double>(id);
    const int64_t n = spec.shape.numel(), stride = std::max<int64_t>(1, n / max_entries);
    GradientComparison c{spec.name};
    double diff2 = 0, numeric2 = 0, analytic2 = 0;
    for (int64_t i = 0; i < n; i += stride, ++c.sampled) {
      const double saved = w[i];
      w[i] = saved + h;
      const double up = loss_of(m);
      w[i] = saved - h;
      const double down = loss_of(m);
      w[i] = saved;
      const double numeric = (up - down) / (2 * h);
      diff2 += (analytic[i] - numeric) * (analytic[i] - numeric);
      numeric2 += numeric * numeric;
      analytic2 += analytic[i] * analytic[i];
    }
    c.difference_norm = std::sqrt(diff2), c.numeric_norm = std::sqrt(numeric2), c.analytic_norm = std::sqrt(analytic2);
    out.push_back(c);
  }
  g.forward(true);  // leave the activations of the unperturbed model in place
  return out;
}

OneThread::OneThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
OneThread::~OneThread() { omp_set_num_threads(saved_); }

}  // namespace normlab::model
