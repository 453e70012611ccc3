#include "analysis/analyses.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "common/error.h"
#include "common/rng.h"
#include "model/crms_convert.h"
#include "model/init.h"
#include "model/placement.h"
#include "probe/stats.h"
#include "train/adamw.h"
#include "train/trainer.h"

namespace normlab::analysis {

namespace eng = normlab::engine;
using probe::tensor_stats;

uint64_t fresh_init_seed(uint64_t seed, int k) {
  // splitmix64 of the seed, then of that xor k's own splitmix64: distinct (seed, k) pairs give
  // unrelated streams.
  return Rng(Rng(seed).next() ^ Rng(0x6a09e667f3bcc909ULL + static_cast<uint64_t>(k)).next()).next();
}

namespace {

// Runs fn(batch) over the first `count` validation batches, telling s.progress after each.
template <typename Fn>
void over_val_batches(model::Model& m, const train::Loader& loader, const AnalysisSettings& s, int count, Fn fn) {
  train::Batch batch;
  for (int i = 0; i < count; ++i) {
    loader.eval_batch(i, count, batch);
    train::feed(m, batch);
    fn(batch, i);
    if (s.progress) s.progress(i + 1, count);
  }
}

// The streams the probes mark (entering each layer, then the stack's output); `analysis` names the one that needs
// them in the refusal of a placement that marks only some.
const std::vector<eng::TensorId>& marked_streams(const model::Model& m, std::string_view analysis) {
  const auto& streams = m.landmarks.layer_inputs;
  if (streams.empty() || std::count(streams.begin(), streams.end(), eng::kNoTensor) > 0)
    fail(
        "{}: placement '{}' combines its layers itself and does not mark the stream between them; choose another "
        "analysis",
        analysis, m.config.placement);
  return streams;
}

// Runs fn() on s.seeds fresh initializations × s.batches training batches each. Each init's seed is
// fresh_init_seed(run seed, k): a mixing of both, so that the inits averaged for run seed s share no
// draw with those of seed s + 1 (seed + k did: seeds 1–3 overlapped in two of their three inits).
template <typename Fn>
void over_fresh_inits(model::Model& m, const train::RunConfig& config, const train::Loader& loader,
                      const AnalysisSettings& s, Fn fn) {
  train::Batch batch;
  for (int seed = 0; seed < s.seeds; ++seed) {
    model::initialize(m, fresh_init_seed(config.train.seed, seed));
    for (int b = 0; b < s.batches; ++b) {
      loader.train_batch(b + 1, seed, batch);
      train::feed(m, batch);
      fn();
    }
  }
}

double parameter_grad_norm(const eng::Graph& g, eng::TensorId id) {
  return std::sqrt(tensor_stats(g, id, true).mean_square * static_cast<double>(g.shape(id).numel()));
}

// max |a − b| / max(max |b|, 1): an error relative to the values' scale.
double scaled_max_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff = std::max(diff, std::abs(a[i] - b[i])), scale = std::max(scale, std::abs(b[i]));
  return diff / scale;
}

}  // namespace

Json stream_at_init(const train::RunConfig& config, const train::Loader& loader, const AnalysisSettings& s) {
  auto m = model::build_inference_model(config.model, config.train.batch_size, config.train.seq_len);
  const auto& inputs = m->landmarks.layer_inputs;
  std::vector<double> sums(inputs.size(), 0.0);
  over_fresh_inits(*m, config, loader, s, [&] {
    m->forward(false);
    for (size_t l = 0; l < inputs.size(); ++l) sums[l] += tensor_stats(m->graph, inputs[l]).mean_square;
  });
  Json out{{"layer", Json::array()}, {"mean_square", Json::array()}};
  for (size_t l = 0; l < sums.size(); ++l) {
    out["layer"].push_back(l);
    out["mean_square"].push_back(sums[l] / (s.seeds * s.batches));
  }
  return out;
}

namespace {

// Pre-RMS has Pre-LN's parameters, so their gradients compare name by name: the largest
// ‖g_rms − g_ln‖ / max(‖g_ln‖, 10⁻³ max ‖g_ln‖), the floor for the key bias, whose exact gradient is 0 (softmax
// ignores a shift of a row).
double largest_grad_error(const eng::Graph& ln, const eng::Graph& rms) {
  double largest = 0;
  for (eng::TensorId id : ln.parameters()) largest = std::max(largest, parameter_grad_norm(ln, id));
  double error = 0;
  std::vector<double> g_ln, g_rms;
  for (eng::TensorId id : ln.parameters()) {
    eng::copy_to_f64(ln, id, g_ln, true);
    eng::copy_to_f64(rms, rms.at(ln.spec(id).name), g_rms, true);
    double diff2 = 0, ref2 = 0;
    for (size_t i = 0; i < g_ln.size(); ++i)
      diff2 += (g_rms[i] - g_ln[i]) * (g_rms[i] - g_ln[i]), ref2 += g_ln[i] * g_ln[i];
    error = std::max(error, std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-3 * largest));
  }
  return error;
}

}  // namespace

// The three models run one validation batch in each precision. Pre-RMS's gradients compare with Pre-LN's
// (largest_grad_error); Pre-CRMS's weights are a linear transform of Pre-LN's, so only its logits and loss compare.
Json norm_equivalence(const model::Model& pre_ln, const train::Loader& loader) {
  const model::ModelConfig& c = pre_ln.config;
  if (!model::placement_of(c).converts_to_crms || c.norm.type != "layernorm" || c.norm.bias || c.tied_embeddings)
    fail(
        "norm-equivalence compares a Pre-LN model with bias-free LayerNorm and untied embeddings (set "
        "model.placement=pre, "
        "model.norm.type=layernorm, model.norm.bias=false, model.tied_embeddings=false); got placement {}, norm {}{}{}",
        c.placement, c.norm.type, c.norm.bias ? " with bias" : "", c.tied_embeddings ? ", tied embeddings" : "");
  model::ModelConfig rms_config = c;
  model::set_placement(rms_config, "pre_rms");
  rms_config.norm.type = "rmsnorm";
  const model::ModelConfig crms_config = model::crms_config_for(c);
  train::Batch batch;
  loader.eval_batch(0, 1, batch);
  const auto run = [&](model::Model& m, bool backward) {
    train::feed(m, batch);
    m.graph.zero_param_grads();
    m.forward(false);
    if (backward) m.graph.backward(m.loss);
  };
  Json out{{"precision", Json::array()},
           {"variant", Json::array()},
           {"logits_max_error", Json::array()},
           {"loss_error", Json::array()},
           {"grad_max_rel_error", Json::array()}};
  std::vector<double> want, got;
  for (eng::DType dtype : {eng::DType::f32, eng::DType::f64}) {
    auto ln = model::build_model(c, pre_ln.batch, pre_ln.seq, dtype);
    model::copy_parameters(pre_ln, *ln);
    auto rms = model::build_model(rms_config, pre_ln.batch, pre_ln.seq, dtype);
    model::copy_parameters(*ln, *rms);
    auto crms = model::build_model(crms_config, pre_ln.batch, pre_ln.seq, dtype);
    model::convert_pre_ln_to_crms(*ln, *crms);
    run(*ln, true);
    run(*rms, true);
    run(*crms, false);
    eng::copy_to_f64(ln->graph, ln->logits, want);

    const double grad_error = largest_grad_error(ln->graph, rms->graph);
    for (const model::Model* m : {rms.get(), crms.get()}) {
      eng::copy_to_f64(m->graph, m->logits, got);
      out["precision"].push_back(dtype == eng::DType::f64 ? "fp64" : "fp32");
      out["variant"].push_back(std::string(m->config.placement.name()));
      out["logits_max_error"].push_back(scaled_max_error(got, want));
      out["loss_error"].push_back(std::abs(m->loss_value() - ln->loss_value()));
      out["grad_max_rel_error"].push_back(m == rms.get() ? Json(grad_error) : Json());
    }
  }
  return out;
}

namespace {

// Xiong et al.'s expected gradient of each parameter for one init: the batches' gradients summed, entry by entry.
struct ExpectedGradients {
  std::vector<std::vector<double>> sums;  // per parameter
  std::vector<double> g;                  // scratch

  void add(const eng::Graph& graph) {
    sums.resize(graph.parameters().size());
    for (size_t i = 0; i < sums.size(); ++i) {
      eng::copy_to_f64(graph, graph.parameters()[i], g, true);
      sums[i].resize(g.size(), 0.0);
      for (size_t j = 0; j < g.size(); ++j) sums[i][j] += g[j];
    }
  }
  // Adds ‖sum / batches‖ of each parameter to norms, and starts the next init from zero.
  void close(int batches, std::vector<double>& norms) {
    for (size_t i = 0; i < sums.size(); ++i) {
      double square = 0;
      for (double& v : sums[i]) square += v * v, v = 0;
      norms[i] += std::sqrt(square) / batches;
    }
  }
};

}  // namespace

Json gradient_norms_at_init(const train::RunConfig& config, const train::Loader& loader, const AnalysisSettings& s) {
  auto m = model::build_model(config.model, config.train.batch_size, config.train.seq_len);
  const auto& params = m->graph.parameters();
  std::vector<double> sums(params.size(), 0.0), expected(params.size(), 0.0);
  ExpectedGradients per_init;
  int batch = 0;
  over_fresh_inits(*m, config, loader, s, [&] {
    m->graph.zero_param_grads();
    m->forward(false);
    m->graph.backward(m->loss);
    for (size_t i = 0; i < sums.size(); ++i) sums[i] += parameter_grad_norm(m->graph, params[i]);
    per_init.add(m->graph);
    if (++batch % s.batches == 0) per_init.close(s.batches, expected);  // this init's last batch
  });
  Json out{{"name", Json::array()}, {"grad_norm", Json::array()}, {"expected_grad_norm", Json::array()}};
  for (size_t i = 0; i < sums.size(); ++i) {
    out["name"].push_back(m->graph.spec(params[i]).name);
    out["grad_norm"].push_back(sums[i] / (s.seeds * s.batches));
    out["expected_grad_norm"].push_back(expected[i] / s.seeds);
  }
  return out;
}

Json one_step_output_change(model::Model& m, const train::Loader& loader, const train::RunConfig& config,
                            const AnalysisSettings& s) {
  const auto& inputs = m.landmarks.layer_inputs;
  if (inputs.empty() || inputs.back() == eng::kNoTensor)
    fail("one-step: placement '{}' does not mark the stack's output", m.config.placement);
  train::Batch batch, other;
  loader.train_batch(1, 0, batch);  // the update batch
  loader.eval_batch(0, 1, other);   // Admin's measurement batch: another batch (validation)
  std::vector<double> before, after, stack_before, stack_after;
  train::feed(m, other);
  m.forward(false);
  eng::copy_to_f64(m.graph, inputs.back(), stack_before);
  train::feed(m, batch);
  m.graph.zero_param_grads();
  m.forward(false);
  eng::copy_to_f64(m.graph, m.logits, before);
  m.graph.backward(m.loss);
  train::AdamW opt(m.graph);  // a fresh optimizer: the first Adam step moves every weight by ≈ lr
  opt.step({s.lr, config.train.beta1, config.train.beta2, config.train.adam_eps, 0.0}, 1.0, 1);
  m.forward(false);
  eng::copy_to_f64(m.graph, m.logits, after);
  train::feed(m, other);
  m.forward(false);
  eng::copy_to_f64(m.graph, inputs.back(), stack_after);
  const auto mean_square = [](const std::vector<double>& a, const std::vector<double>& b) {
    double sum = 0;
    for (size_t i = 0; i < a.size(); ++i) sum += (a[i] - b[i]) * (a[i] - b[i]);
    return sum / static_cast<double>(std::max<size_t>(a.size(), 1));
  };
  return {{"lr", s.lr},
          {"output_change_rms", std::sqrt(mean_square(after, before))},
          {"stack_change_ms", mean_square(stack_after, stack_before)}};
}

namespace {

// The tape position of the node that writes tensor t.
size_t writer_of(const eng::Graph& g, eng::TensorId t) {
  for (const eng::Node& n : g.nodes())
    if (n.out == t) return static_cast<size_t>(n.index);
  fail("internal: no node writes '{}'", g.spec(t).name);
}

// Every residual branch's output with the node that writes it, in tape order: a forward pass stopped right after
// that node can change the output before any reader sees it.
std::vector<std::pair<size_t, eng::TensorId>> branch_writers(const model::Model& m) {
  std::vector<std::pair<size_t, eng::TensorId>> out;
  for (const auto& layer : m.landmarks.branch_outputs)
    for (eng::TensorId y : layer)
      if (y != eng::kNoTensor) out.emplace_back(writer_of(m.graph, y), y);
  if (out.empty()) fail("branch-noise: placement '{}' marks no residual branch outputs", m.config.placement);
  std::sort(out.begin(), out.end());
  for (const auto& [node, y] : out)
    if (m.graph.nodes()[node].fused_with_next)
      fail("branch-noise: the branch output '{}' is written inside a fused pair (run with engine.fuse=false)",
           m.graph.spec(y).name);
  return out;
}

// One forward pass with N(0, std²) added to every entry of every branch output as soon as it is written.
void forward_with_branch_noise(model::Model& m, const std::vector<std::pair<size_t, eng::TensorId>>& branches,
                               double std, Rng& rng) {
  size_t start = 0;
  for (const auto& branch : branches) {
    // Named copies, not a structured binding: clang-14 cannot capture a binding in the lambda below.
    const size_t node = branch.first;
    const eng::TensorId y = branch.second;
    m.graph.forward(false, start, node + 1);
    eng::dispatch_float(m.graph.float_type(), [&]<typename T>() {
      T* v = m.graph.data<T>(y);
      for (int64_t i = 0, n = m.graph.shape(y).numel(); i < n; ++i) v[i] += static_cast<T>(std * rng.normal());
    });
    start = node + 1;
  }
  m.graph.forward(false, start);
}

}  // namespace

Json branch_noise_output_change(model::Model& m, const train::Loader& loader, const train::RunConfig& config,
                                const AnalysisSettings& s) {
  const auto branches = branch_writers(m);
  // F: what the head reads, the stack's output on the normalized scale every placement shares.
  const eng::TensorId F = m.graph.nodes()[writer_of(m.graph, m.graph.at("logits"))].in[0];
  Rng rng(hash_string("branch-noise", config.train.seed));
  std::vector<double> clean, noisy;
  double sum = 0;
  size_t count = 0;
  train::Batch batch;
  for (int b = 0; b < s.batches; ++b) {
    loader.eval_batch(b, s.batches, batch);
    train::feed(m, batch);
    m.forward(false);
    eng::copy_to_f64(m.graph, F, clean);
    forward_with_branch_noise(m, branches, s.branch_noise, rng);
    eng::copy_to_f64(m.graph, F, noisy);
    for (size_t i = 0; i < clean.size(); ++i) sum += (noisy[i] - clean[i]) * (noisy[i] - clean[i]);
    count += clean.size();
  }
  return {{"branch_noise_var", s.branch_noise * s.branch_noise},
          {"branches", branches.size()},
          {"output_change_var", sum / static_cast<double>(std::max<size_t>(count, 1))}};
}

Json angular_distances(model::Model& m, const train::Loader& loader, const AnalysisSettings& s) {
  const auto& inputs = m.landmarks.layer_inputs;
  const size_t pairs = inputs.size() > static_cast<size_t>(s.span) ? inputs.size() - static_cast<size_t>(s.span) : 0;
  std::vector<double> sums(pairs, 0.0);
  std::vector<double> a, b;
  int64_t rows = 0;
  over_val_batches(m, loader, s, s.batches, [&](const train::Batch&, int) {
    m.forward(false);
    for (size_t l = 0; l < pairs; ++l) {
      eng::copy_to_f64(m.graph, inputs[l], a);
      eng::copy_to_f64(m.graph, inputs[l + static_cast<size_t>(s.span)], b);
      const int64_t width = m.graph.shape(inputs[l]).last(), n = static_cast<int64_t>(a.size()) / width;
      for (int64_t r = 0; r < n; ++r) {
        double dot = 0, na = 0, nb = 0;
        for (int64_t j = r * width; j < (r + 1) * width; ++j) {
          dot += a[static_cast<size_t>(j)] * b[static_cast<size_t>(j)];
          na += a[static_cast<size_t>(j)] * a[static_cast<size_t>(j)];
          nb += b[static_cast<size_t>(j)] * b[static_cast<size_t>(j)];
        }
        const double cosine = na > 0 && nb > 0 ? std::clamp(dot / std::sqrt(na * nb), -1.0, 1.0) : 1.0;
        sums[l] += std::acos(cosine) / std::numbers::pi;
      }
      if (l == 0) rows += n;
    }
  });
  Json out{{"span", s.span}, {"layer", Json::array()}, {"angular_distance", Json::array()}};
  for (size_t l = 0; l < pairs; ++l) {
    out["layer"].push_back(l);
    out["angular_distance"].push_back(sums[l] / static_cast<double>(std::max<int64_t>(rows, 1)));
  }
  return out;
}

Json layer_drop(model::Model& m, const train::Loader& loader, const AnalysisSettings& s) {
  const double full = train::evaluate(m, loader, s.batches).loss;
  Json out{{"full_loss", full}, {"layer", Json::array()}, {"loss", Json::array()}, {"delta_loss", Json::array()}};
  for (int l = 0; l < m.config.n_layers; ++l) {
    auto dropped = model::build_inference_model(m.config, m.batch, m.seq, m.graph.float_type(), l, &m);
    const double loss = train::evaluate(*dropped, loader, s.batches).loss;
    out["layer"].push_back(l);
    out["loss"].push_back(loss);
    out["delta_loss"].push_back(loss - full);
    if (s.progress) s.progress(l + 1, m.config.n_layers);
  }
  return out;
}

namespace {

// The largest |x| of a stream over the batches, and where it sits.
struct Peak {
  double abs = -1, value = 0;
  int batch = 0;
  int64_t row = 0, position = 0, feature = 0;
  int32_t token = 0;
};

// Each row's largest logit's index: the top-1 token at each position.
void top1(const eng::Graph& g, eng::TensorId logits, std::vector<int32_t>& out) {
  const int64_t vocab = g.shape(logits).last(), rows = g.shape(logits).numel() / vocab;
  out.resize(static_cast<size_t>(rows));
  eng::dispatch_float(g.float_type(), [&]<typename T>() {
    const T* z = g.data<T>(logits);
    for (int64_t r = 0; r < rows; ++r)
      out[static_cast<size_t>(r)] =
          static_cast<int32_t>(std::max_element(z + r * vocab, z + (r + 1) * vocab) - (z + r * vocab));
  });
}

}  // namespace

Json massive_activations(model::Model& m, const train::Loader& loader, const AnalysisSettings& s) {
  const auto& streams = marked_streams(m, "massive-activations");
  std::vector<Peak> peaks(streams.size());
  std::vector<double> squares(streams.size(), 0.0), medians(streams.size(), 0.0), x;
  double entries = 0;
  over_val_batches(m, loader, s, s.batches, [&](const train::Batch& batch, int index) {
    m.forward(false);
    for (size_t l = 0; l < streams.size(); ++l) {
      eng::copy_to_f64(m.graph, streams[l], x);
      const int64_t width = m.graph.shape(streams[l]).last();
      for (size_t i = 0; i < x.size(); ++i) {
        squares[l] += x[i] * x[i];
        if (std::abs(x[i]) <= peaks[l].abs) continue;           // a tie keeps the first place
        const int64_t token = static_cast<int64_t>(i) / width;  // row · seq + position
        peaks[l] = {std::abs(x[i]),
                    x[i],
                    index,
                    token / m.seq,
                    token % m.seq,
                    static_cast<int64_t>(i) % width,
                    batch.tokens[static_cast<size_t>(token)]};
      }
      for (double& v : x) v = std::abs(v);
      std::nth_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(x.size() / 2), x.end());
      medians[l] += x[x.size() / 2];
    }
    entries += static_cast<double>(x.size());
  });
  Json out;
  for (size_t l = 0; l < streams.size(); ++l) {
    const Peak& p = peaks[l];
    const double median = medians[l] / s.batches;
    const Json row{{"layer", l},
                   {"max_abs", p.abs},
                   {"value", p.value},
                   {"batch", p.batch},
                   {"row", p.row},
                   {"position", p.position},
                   {"feature", p.feature},
                   {"token_id", p.token},
                   {"rms", std::sqrt(squares[l] / entries)},
                   {"median_abs", median},
                   {"max_over_median", median > 0 ? Json(p.abs / median) : Json()}};
    for (const auto& [key, v] : row.items()) out[key].push_back(v);
    if (s.token_text) out["token"].push_back(s.token_text(p.token));
  }
  return out;
}

Json logit_lens(model::Model& m, const train::Loader& loader, const AnalysisSettings& s) {
  const auto& streams = marked_streams(m, "logit-lens");
  auto readout = model::build_readout_model(m.config, m.batch, m.seq, m.graph.float_type(), m);
  const eng::TensorSpec& input = readout->graph.spec(readout->stream);
  const size_t last = streams.size() - 1;
  std::vector<double> losses(streams.size(), 0.0), hits(streams.size(), 0.0), agreements(streams.size(), 0.0);
  std::vector<int32_t> top, final_top;
  double model_loss = 0, scored = 0;
  over_val_batches(m, loader, s, s.batches, [&](const train::Batch& batch, int) {
    model_loss += m.forward(false);
    std::copy(batch.targets.begin(), batch.targets.end(), readout->graph.data<int32_t>(readout->targets));
    for (size_t l = last + 1; l-- > 0;) {  // the output first: every other stream's top-1 is compared with its
      std::memcpy(input.data, m.graph.spec(streams[l]).data, input.bytes());
      losses[l] += readout->forward(false);
      top1(readout->graph, readout->logits, top);
      if (l == last) final_top = top;
      for (size_t i = 0; i < top.size(); ++i)
        if (batch.targets[i] >= 0) hits[l] += top[i] == batch.targets[i], agreements[l] += top[i] == final_top[i];
    }
    scored += static_cast<double>(
        std::count_if(batch.targets.begin(), batch.targets.end(), [](int32_t t) { return t >= 0; }));
  });
  Json out{{"model_loss", model_loss / s.batches}};
  for (size_t l = 0; l <= last; ++l) {
    out["layer"].push_back(l);
    out["loss"].push_back(losses[l] / s.batches);
    out["top1_accuracy"].push_back(hits[l] / std::max(scored, 1.0));
    out["top1_agreement"].push_back(agreements[l] / std::max(scored, 1.0));
  }
  return out;
}

Json attention_entropy(model::Model& m, const train::Loader& loader, const AnalysisSettings& s) {
  const int heads = m.config.n_heads, layers = m.config.n_layers;
  std::vector<double> sums(static_cast<size_t>(heads * layers), 0.0);
  over_val_batches(m, loader, s, s.batches, [&](const train::Batch&, int) {
    m.forward(false);
    for (int l = 0; l < layers; ++l) {
      // An encoder-decoder's: its decoder's self-attention (the stack the probes report).
      const eng::TensorId probs =
          m.graph.at(fmt::format("{}layers.{}.attn.heads.probs", m.config.encoder_decoder() ? "decoder." : "", l));
      const eng::Shape& shape = m.graph.shape(probs);  // [B, H, T, T]
      eng::dispatch_float(m.graph.float_type(), [&]<typename T>() {
        const T* p = m.graph.data<T>(probs);
        for (int64_t b = 0; b < shape[0]; ++b)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t t = 0; t < shape[2]; ++t) {
              const T* row = p + ((b * heads + h) * shape[2] + t) * shape[3];
              double e = 0;
              for (int64_t j = 0; j <= t; ++j)
                if (row[j] > 0) e -= double(row[j]) * std::log(double(row[j]));
              sums[static_cast<size_t>(l * heads + h)] += e / static_cast<double>(shape[0] * shape[2]);
            }
      });
    }
  });
  Json out{{"layer", Json::array()}, {"head", Json::array()}, {"entropy", Json::array()}};
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < heads; ++h) {
      out["layer"].push_back(l);
      out["head"].push_back(h);
      out["entropy"].push_back(sums[static_cast<size_t>(l * heads + h)] / s.batches);
    }
  return out;
}

namespace {

// grad-init builds fresh models one at a time and keeps each init's gradient sums in fp64 (as many bytes as a
// model's fp32 parameters and gradients), stream-init builds fresh inference-only models one at a time, layer-drop one
// inference-only model without a layer at a time, reading the run's weights in place, norm-equivalence the Pre-LN,
// Pre-RMS and Pre-CRMS models in fp64 (6 fp32 copies' worth).
const Analysis kAnalyses[] = {
    {"grad-init",
     "‖∂L/∂W‖ of every weight at initialization, averaged over --seeds inits x --batches batches (Xiong et al. 2020, "
     "Fig. 3: Post-LN's last-layer gradient is flat in depth, Pre-LN's shrinks like 1/√L), and expected_grad_norm = "
     "‖the gradient averaged over the batches‖ per init, averaged over inits (Fig. 3(a, b)'s 'expected gradient'). "
     "Always from fresh inits of the config.",
     "name, grad_norm, expected_grad_norm",
     [](const AnalysisInput& in) { return gradient_norms_at_init(in.config, in.loader, in.settings); },
     {.trainable = 2}},
    {"one-step",
     "the output change after one Adam step of --lr from W to W* on training batch 0 (Liu et al. 2020, Admin's "
     "amplification: Post-LN's output change grows with depth), two ways: output_change_rms = RMS of the logit change "
     "on the update batch itself (every parameter moved); stack_change_ms = Admin's |F(x,W*) − F(x,W)|², the mean "
     "square change of the layer stack's output (before final norm and head) on another batch (validation batch 0).",
     "output_change_rms, stack_change_ms",
     [](const AnalysisInput& in) { return one_step_output_change(in.model, in.loader, in.config, in.settings); },
     {},
     true,
     true},
    {"branch-noise",
     "Admin's Theorem 2 (Liu et al. 2020): independent N(0, C) noise (C = 1e-4) on every entry of every residual "
     "branch's output, and output_change_var = Var[ΔF], the mean square change of the stack's normalized output (what "
     "the head reads) over --batches draws on validation batches. Post-LN's grows like N sub-layers, Pre-LN's and "
     "Admin's like log N; one Adam step (one-step) moves every branch the same way instead.",
     "branch_noise_var, branches, output_change_var",
     [](const AnalysisInput& in) { return branch_noise_output_change(in.model, in.loader, in.config, in.settings); }},
    {"angular",
     "arccos(cos(x_ℓ, x_ℓ+n))/π between the residual streams entering layers ℓ and ℓ+n (n = --span), averaged over "
     "tokens (Gromov et al. 2024; Sun et al. 2025, Curse of Depth: deep Pre-LN layers barely turn the stream).",
     "span, layer, angular_distance",
     [](const AnalysisInput& in) { return angular_distances(in.model, in.loader, in.settings); },
     {},
     false,
     false,
     "angular-distance"},
    {"layer-drop",
     "validation loss with layer ℓ skipped, minus the full model's (Li et al. 2025 Mix-LN; Sun et al. 2025: deep "
     "Pre-LN layers can be removed at little cost).",
     "full_loss, layer, loss, delta_loss",
     [](const AnalysisInput& in) { return layer_drop(in.model, in.loader, in.settings); },
     {.sharing = 1}},
    {"attention-entropy", "entropy (nats) of each head's attention distribution, averaged over queries.",
     "layer, head, entropy",
     [](const AnalysisInput& in) { return attention_entropy(in.model, in.loader, in.settings); }},
    {"stream-init",
     "E‖x_l‖²/d of the residual stream entering each layer at init, averaged over --seeds inits x --batches batches "
     "(Xiong et al. 2020, Lemma 2: Pre-LN grows like 1 + l/2 ... 1 + 3l/2, Post-LN stays at 1). Always from fresh "
     "inits of the config.",
     "layer, mean_square",
     [](const AnalysisInput& in) { return stream_at_init(in.config, in.loader, in.settings); },
     {.inference = 1}},
    {"massive-activations",
     "per stream (entering each layer, then the stack's output) the largest |x| over the batches' tokens and features "
     "and where it sits (batch, row, position, feature, token id; the token's text where the run has a tokenizer), "
     "with the stream's RMS and median |x| for scale (Sun et al. 2024, Massive Activations: single values thousands "
     "of times the median, on a few tokens such as the first, in GPT-2 and Llama 2).",
     "layer, max_abs, value, batch, row, position, feature, token_id, token, rms, median_abs, max_over_median",
     [](const AnalysisInput& in) { return massive_activations(in.model, in.loader, in.settings); }},
    {"logit-lens",
     "each stream (entering each layer, then the stack's output) through the model's own final norm and head: its "
     "loss against the next tokens, the share of positions where its top-1 token is the next token and where it is "
     "the full model's top-1 (nostalgebraist 2020, the logit lens). The last stream's loss is the model's.",
     "model_loss, layer, loss, top1_accuracy, top1_agreement",
     [](const AnalysisInput& in) { return logit_lens(in.model, in.loader, in.settings); }},
    {"norm-equivalence",
     "the model (Pre-LN, bias-free LayerNorm, untied embeddings) against Pre-RMSNorm with the same weights and "
     "Pre-CRMSNorm converted from it: logits, loss and gradient errors in fp32 and fp64 (Jiang et al. 2023). Not in "
     "the default list.",
     "logits, loss and gradients compared",
     [](const AnalysisInput& in) { return norm_equivalence(in.model, in.loader); },
     {.trainable = 6}},
};

}  // namespace

std::span<const Analysis> all_analyses() { return kAnalyses; }

std::string analyses_help() {
  std::string out = "Analyses (choose with --analysis a,b,...):\n";
  for (const Analysis& a : kAnalyses) {
    out += fmt::format("  {:<18} ", a.name);
    size_t column = 21;
    if (!a.alias.empty()) out += fmt::format("(also: {}) ", a.alias), column += a.alias.size() + 9;
    for (size_t at = 0; at < a.about.size();) {  // words wrapped at 110 columns
      const size_t space = std::min(a.about.find(' ', at), a.about.size());
      const std::string_view word = a.about.substr(at, space - at);
      if (column + word.size() > 110) out += "\n" + std::string(21, ' '), column = 21;
      out += fmt::format("{} ", word), column += word.size() + 1;
      at = space + 1;
    }
    out += fmt::format("\n{}columns: {}\n", std::string(21, ' '), a.columns);
  }
  return out;
}

std::vector<const Analysis*> parse_analyses(std::string_view list) {
  std::vector<const Analysis*> out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string_view name = list.substr(at, comma - at);
    const auto it = std::find_if(std::begin(kAnalyses), std::end(kAnalyses), [&](const Analysis& a) {
      return a.name == name || (!a.alias.empty() && a.alias == name);
    });
    if (it == std::end(kAnalyses)) {
      std::vector<std::string> names;
      for (const Analysis& a : kAnalyses)
        names.push_back(a.alias.empty() ? std::string(a.name) : fmt::format("{} (also: {})", a.name, a.alias));
      fail("--analysis: unknown analysis '{}' (known: {}): choose from these, separated by commas", name,
           fmt::join(names, ", "));
    }
    out.push_back(&*it);
    at = comma + 1;
  }
  return out;
}

train::MemoryNeeds memory_needs(std::string_view list) {
  train::MemoryNeeds needs;
  for (const Analysis* a : parse_analyses(list)) {
    needs.optimizer = needs.optimizer || a->optimizer;
    needs.extra_models = std::max(needs.extra_models, a->extra_models.trainable);
    needs.extra_inference_models = std::max(needs.extra_inference_models, a->extra_models.inference);
    needs.extra_sharing_models = std::max(needs.extra_sharing_models, a->extra_models.sharing);
  }
  // The model read is inference-only unless an analysis takes an optimizer step on it, the one use of its gradients
  // (the analyses of gradients at init build models of their own).
  needs.gradients = needs.optimizer;
  return needs;
}

}  // namespace normlab::analysis
