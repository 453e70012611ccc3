#include "probe/training_probe.h"

#include <cmath>

#include "common/error.h"
#include "engine/ops.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "io/step_log.h"
#include "probe/norm_sites.h"
#include "probe/records.h"
#include "probe/stats.h"

namespace normlab::probe {

namespace fs = std::filesystem;
namespace eng = normlab::engine;

namespace {
constexpr const char* kReference = "probe_reference.safetensors";

io::LogFile::Mode mode(bool resume) { return resume ? io::LogFile::Mode::append : io::LogFile::Mode::truncate; }

// A probes file cut back to `step`, after checking that its steps never go back and that each probed step up to
// `step` has its lines.
void keep_probes_up_to(const fs::path& file, io::StepLogFormat format, int step, const std::vector<int>& probed) {
  const io::StepLog log = io::read_step_log(file, format);
  io::require_steps(log, file, probed, "probe record");
  io::keep_steps_up_to(file, log, step);
}
}  // namespace

TrainingProbe::TrainingProbe(model::Model& m, const fs::path& run_dir, bool resume)
    : m_(m), dir_(run_dir), jsonl_(dir_ / "probes.jsonl", mode(resume)), csv_(dir_ / "probes.csv", mode(resume)) {
  if (fs::file_size(csv_.path()) == 0) {
    csv_.append("step,family,name,layer,sublayer,quantity,value\n");
    csv_.flush();
  }
  for (eng::TensorId id : m.graph.parameters())
    before_update_.emplace_back(static_cast<size_t>(m.graph.shape(id).numel()));
}

void TrainingProbe::close() {
  jsonl_.close();
  csv_.close();
}

void TrainingProbe::truncate(const fs::path& run_dir, int step, int probe_every) {
  std::vector<int> probed;  // step 1 (the state at init) and every probe_every-th
  if (probe_every > 0 && step >= 1) probed.push_back(1);
  for (int s = probe_every; probe_every > 0 && s <= step; s += probe_every)
    if (s > 1) probed.push_back(s);
  keep_probes_up_to(run_dir / "probes.jsonl", io::StepLogFormat::jsonl, step, probed);
  keep_probes_up_to(run_dir / "probes.csv", io::StepLogFormat::csv, step, probed);
}

void TrainingProbe::feed_reference() {
  if (!probe_source_.empty()) m_.set_source(probe_source_.data(), probe_lengths_.data());
  m_.set_batch(probe_tokens_.data(), probe_targets_.data());
}

void TrainingProbe::set_reference(const int32_t* tokens, const int32_t* targets, const int32_t* source,
                                  const int32_t* source_lengths) {
  const size_t n = static_cast<size_t>(m_.batch) * static_cast<size_t>(m_.seq);
  probe_tokens_.assign(tokens, tokens + n);
  probe_targets_.assign(targets, targets + n);
  if (source) {
    probe_source_.assign(source, source + n);
    probe_lengths_.assign(source_lengths, source_lengths + m_.batch);
  }
  const fs::path file = dir_ / kReference;
  if (fs::exists(file)) {
    reference_logits_ = io::SafetensorsFile::read(file, "probe reference").at("logits").to_f64_vector();
    return;
  }
  feed_reference();
  m_.forward(false);
  eng::copy_to_f64(m_.graph, m_.logits, reference_logits_);
  const auto& s = m_.graph.shape(m_.logits);
  io::write_safetensors(
      file, std::vector<io::TensorToWrite>{{"logits", io::Dtype::F64, {s[0], s[1], s[2]}, reference_logits_.data()}});
}

void TrainingProbe::write(int step, const char* family, const Json& columns) {
  Json record{{field::step, step}, {field::family, family}};
  for (const auto& [k, v] : columns.items()) record[k] = v;
  jsonl_.append(record.dump());
  jsonl_.append("\n");
  // Long form: one CSV row per (entry, quantity). Columns field::name, field::layer, field::sublayer identify entries;
  // a single-valued field (the loss and model_update families) is one row without identifiers.
  const size_t n = columns.contains(field::name)    ? columns[field::name].size()
                   : columns.contains(field::layer) ? columns[field::layer].size()
                                                    : 1;
  for (size_t i = 0; i < n; ++i)
    for (const auto& [quantity, values] : columns.items()) {
      if (quantity == field::name || quantity == field::layer || quantity == field::sublayer) continue;
      if (!values.is_array() && i > 0) continue;
      auto entry = [&](const char* key) {
        if (!columns.contains(key) || !columns[key].is_array()) return std::string();
        return columns[key][i].is_string() ? columns[key][i].get<std::string>() : columns[key][i].dump();
      };
      const Json& value = values.is_array() ? values[i] : values;
      csv_.append(fmt::format("{},{},{},{},{},{},{}\n", step, family, entry(field::name), entry(field::layer),
                              entry(field::sublayer), quantity, value.dump()));
    }
  jsonl_.flush();
  csv_.flush();
}

namespace {

// The stream family: per layer input (and the stack's output), its values' mean square, RMS and largest |x|, and its
// gradient's norm.
Json stream_columns(const eng::Graph& g, const model::Landmarks& lm) {
  Json stream{{field::layer, Json::array()},
              {field::mean_square, Json::array()},
              {field::rms, Json::array()},
              {field::max_abs, Json::array()},
              {field::grad_norm, Json::array()}};
  for (size_t l = 0; l < lm.layer_inputs.size(); ++l) {
    if (lm.layer_inputs[l] == eng::kNoTensor) continue;
    const TensorStats v = tensor_stats(g, lm.layer_inputs[l]);
    const TensorStats d = tensor_stats(g, lm.layer_inputs[l], true);
    const double count = static_cast<double>(g.shape(lm.layer_inputs[l]).numel());
    stream[field::layer].push_back(l);
    stream[field::mean_square].push_back(v.mean_square);
    stream[field::rms].push_back(v.rms());
    stream[field::max_abs].push_back(v.max_abs);
    stream[field::grad_norm].push_back(std::sqrt(d.mean_square * count));
  }
  return stream;
}

// The branch family: per layer and sub-layer, the branch output's RMS and largest |x|.
Json branch_columns(const eng::Graph& g, const model::Landmarks& lm) {
  Json branch{{field::layer, Json::array()},
              {field::sublayer, Json::array()},
              {field::rms, Json::array()},
              {field::max_abs, Json::array()}};
  for (size_t l = 0; l < lm.branch_outputs.size(); ++l)
    for (int s = 0; s < 2; ++s) {
      if (lm.branch_outputs[l][static_cast<size_t>(s)] == eng::kNoTensor) continue;
      const TensorStats v = tensor_stats(g, lm.branch_outputs[l][static_cast<size_t>(s)]);
      branch[field::layer].push_back(l);
      branch[field::sublayer].push_back(s == 0 ? "attn" : "ffn");
      branch[field::rms].push_back(v.rms());
      branch[field::max_abs].push_back(v.max_abs);
    }
  return branch;
}

// The norm family: per norm site, its 1/σ and its input's RMS.
Json norm_columns(const eng::Graph& g) {
  Json norms{{field::name, Json::array()}, {field::inv_sigma, Json::array()}, {field::input_rms, Json::array()}};
  for (const NormSite& site : norm_sites(g)) {
    const NormReading r = read_norm(g, site);
    norms[field::name].push_back(site.name);
    norms[field::inv_sigma].push_back(r.inv_sigma);
    norms[field::input_rms].push_back(r.input_rms);
  }
  return norms;
}

}  // namespace

void TrainingProbe::after_backward(int step, double loss, double grad_norm) {
  const eng::Graph& g = m_.graph;
  write(step, family::stream, stream_columns(g, m_.landmarks));
  write(step, family::branch, branch_columns(g, m_.landmarks));
  write(step, family::norm, norm_columns(g));

  Json params{{field::name, Json::array()}, {field::weight_norm, Json::array()}, {field::grad_norm, Json::array()}};
  Json scalars{{field::name, Json::array()}, {field::value, Json::array()}};
  const auto& ids = g.parameters();
  for (size_t i = 0; i < ids.size(); ++i) {
    const eng::TensorSpec& p = g.spec(ids[i]);
    const double n = static_cast<double>(p.shape.numel());
    params[field::name].push_back(p.name);
    params[field::weight_norm].push_back(std::sqrt(tensor_stats(g, ids[i]).mean_square * n));
    params[field::grad_norm].push_back(std::sqrt(tensor_stats(g, ids[i], true).mean_square * n));
    eng::copy_to_f64(g, ids[i], before_update_[i]);
    if (p.role == eng::Role::scalar) {  // ReZero α, GPAS gates, DyT α, ScaleNorm g, Admin ω (mean) ...
      double sum = 0;
      for (double v : before_update_[i]) sum += v;
      scalars[field::name].push_back(p.name);
      scalars[field::value].push_back(sum / n);
    }
  }
  write(step, family::param, params);
  if (!scalars[field::name].empty()) write(step, family::scalar, scalars);
  write(step, family::loss, {{field::loss, loss}, {field::grad_norm, grad_norm}});
}

void TrainingProbe::after_update(int step) {
  const eng::Graph& g = m_.graph;
  Json updates{{field::name, Json::array()}, {field::update_norm, Json::array()}, {field::update_ratio, Json::array()}};
  const auto& ids = g.parameters();
  for (size_t i = 0; i < ids.size(); ++i) {
    eng::copy_to_f64(g, ids[i], scratch_);
    double du = 0, w = 0;
    for (size_t j = 0; j < scratch_.size(); ++j) {
      du += (scratch_[j] - before_update_[i][j]) * (scratch_[j] - before_update_[i][j]);
      w += before_update_[i][j] * before_update_[i][j];
    }
    updates[field::name].push_back(g.spec(ids[i]).name);
    updates[field::update_norm].push_back(std::sqrt(du));
    updates[field::update_ratio].push_back(w > 0 ? std::sqrt(du / w) : 0.0);
  }
  write(step, family::update, updates);

  if (probe_tokens_.empty()) return;
  feed_reference();
  m_.forward(false);
  eng::copy_to_f64(g, m_.logits, scratch_);
  double diff = 0;
  for (size_t j = 0; j < scratch_.size(); ++j)
    diff += (scratch_[j] - reference_logits_[j]) * (scratch_[j] - reference_logits_[j]);
  write(step, family::model_update,
        {{field::logit_change_rms, std::sqrt(diff / static_cast<double>(scratch_.size()))}});
}

}  // namespace normlab::probe
