#include "study/kit.h"

#include <cmath>
#include <fstream>

#include "io/atomic_file.h"
#include "study/studies.h"

namespace normlab::study {

namespace fs = std::filesystem;

Json small_lm(const std::string& placement, int layers, int steps, uint64_t seed, int warmup, int probe_every) {
  return Json{{"model",
               {{"placement", placement}, {"n_layers", layers}, {"d_model", 64}, {"n_heads", 4}, {"d_ff", 256}, {"max_seq_len", 64}}},
              {"train",
               {{"batch_size", 16}, {"seq_len", 64}, {"steps", steps}, {"lr", 1e-3}, {"schedule", "constant"},
                {"warmup", warmup}, {"beta2", 0.98}, {"clip", 0.0}, {"weight_decay", 0.0}, {"log_every", 10},
                {"eval_every", 0}, {"eval_batches", 4}, {"checkpoint_every", 0}, {"seed", seed},
                {"probe_every", probe_every}}}};
}

Json& use_xavier(Json& config) {
  config["model"]["embed_scale"] = "sqrt_d";
  config["model"]["init"] = {{"scheme", "xavier"}, {"embed_std", 0.0}};
  return config;
}

std::string seed_id(const std::string& arm, int seed) { return fmt::format("{}-s{}", arm, seed); }

std::vector<RunRequest> placement_runs(int seeds, std::span<const Arm> arms, const TrainPreset& p, int warmup,
                                       const std::string& analyses) {
  std::vector<RunRequest> runs;
  for (int seed = 1; seed <= seeds; ++seed)
    for (const Arm& a : arms)
      runs.push_back({seed_id(a.id, seed), small_lm(a.id, p.layers, p.steps, static_cast<uint64_t>(seed), warmup, p.probe_every),
                      "train", analyses});
  return runs;
}

const RunOutcome* find_run(const std::vector<RunOutcome>& runs, const std::string& id) {
  for (const RunOutcome& r : runs)
    if (r.request.id == id) return &r;
  return nullptr;
}

double seed_mean(int seeds, const std::function<double(int)>& value) {
  double sum = 0;
  int n = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    const double v = value(seed);
    if (!std::isnan(v)) sum += v, ++n;
  }
  return n ? sum / n : NAN;
}

std::vector<double> seed_mean_each(int seeds, size_t size, const std::function<std::vector<double>(int)>& values) {
  std::vector<double> sum(size, 0.0), count(size, 0.0);
  for (int seed = 1; seed <= seeds; ++seed) {
    const std::vector<double> v = values(seed);
    for (size_t i = 0; i < size && i < v.size(); ++i)
      if (!std::isnan(v[i])) sum[i] += v[i], count[i] += 1;
  }
  for (size_t i = 0; i < size; ++i) sum[i] = count[i] > 0 ? sum[i] / count[i] : NAN;
  return sum;
}

std::vector<double> analysis_column(const RunOutcome* run, const std::string& analysis, const std::string& column) {
  if (!run || run->status != RunStatus::finished) return {};
  return numbers(read_analysis(run->dir, analysis)[column]);
}

TrainResult train_result(const RunOutcome* run) {
  TrainResult r;
  if (!run) return r.outcome = "missing", r;
  const TrainCurve curve = read_train_curve(run->dir / "run");
  r.final_loss = curve.final_loss();
  const fs::path summary = run->dir / "run" / "summary.json";
  if (fs::exists(summary)) {
    const Json s = Json::parse(io::read_file(summary), nullptr, false);
    if (!s.is_discarded()) {
      r.val_loss = s.value("val_loss", NAN);
      r.unigram = s.value("unigram_entropy_nats", NAN);
      r.seconds = s.value("seconds", NAN);
    }
  }
  if (run->status == RunStatus::diverged) r.outcome = "diverged";
  else if (run->status == RunStatus::failed) r.outcome = "failed";
  else r.outcome = finished_outcome(curve, r.unigram);
  return r;
}

std::string finished_outcome(const TrainCurve& curve, double unigram) {
  if (!(curve.final_loss() > unigram - 0.25)) return "trained";
  return curve.recent_drop() < 0.1 ? "stalled" : "slow";
}

Table outcome_table(const std::string& title, const std::vector<RunOutcome>& runs) {
  Table t{title + " (" + kStalledRule + ")", {"run", "outcome", "final train loss", "val loss", "seconds"}};
  for (const RunOutcome& run : runs) {
    if (run.request.kind != "train") continue;
    const TrainResult r = train_result(&run);
    t.rows.push_back({run.request.id, r.outcome, num(r.final_loss), num(r.val_loss), fmt::format("{:.0f}", run.seconds)});
    t.row_class.push_back(r.outcome == "failed" ? "diverged" : r.outcome);
  }
  return t;
}

std::vector<Json> probe_records(const fs::path& run_dir, const std::string& family) {
  std::vector<Json> out;
  std::ifstream in(run_dir / "probes.jsonl");
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("family", "") == family) out.push_back(std::move(j));
  }
  return out;
}

std::vector<double> numbers(const Json& column) {
  std::vector<double> out;
  if (column.is_array())
    for (const Json& v : column) out.push_back(v.is_number() ? v.get<double>() : NAN);
  return out;
}

Series layer_series(const std::string& label, const Json& record, const std::string& column) {
  if (record.is_null()) return {label, {}, {}};
  return {label, numbers(record["layer"]), numbers(record[column])};
}

Series indexed_series(const std::string& label, const std::vector<double>& y) {
  Series s{label, {}, y};
  for (size_t i = 0; i < y.size(); ++i) s.x.push_back(static_cast<double>(i));
  return s;
}

Series loss_series(const std::string& label, const RunOutcome* run) {
  if (!run) return {label, {}, {}};
  const TrainCurve c = read_train_curve(run->dir / "run");
  return {label, c.step, c.loss};
}

bool all_trained(const std::vector<RunOutcome>& runs, const std::string& arm, int seeds) {
  for (int seed = 1; seed <= seeds; ++seed)
    if (train_result(find_run(runs, seed_id(arm, seed))).outcome != "trained") return false;
  return true;
}

double mean_val_loss(const std::vector<RunOutcome>& runs, const std::string& arm, int seeds) {
  return seed_mean(seeds, [&](int seed) { return train_result(find_run(runs, seed_id(arm, seed))).val_loss; });
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

std::string num(double v) {
  if (std::isnan(v)) return "n/a";
  return std::abs(v) >= 0.01 || v == 0 ? fmt::format("{:.3f}", v) : fmt::format("{:.3g}", v);
}

}  // namespace normlab::study
