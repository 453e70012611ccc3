#include "study/kit.h"
#include "probe/records.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "common/error.h"
#include "io/atomic_file.h"
#include "study/studies.h"
#include "train/records.h"

namespace normlab::study {

namespace fs = std::filesystem;

int log_interval(int steps) { return std::clamp(steps / 8, 1, 10); }

std::vector<int> depths(const StudyOptions& o) {
  std::vector<int> d = o.int_axis("model.n_layers");
  std::sort(d.begin(), d.end());
  return d;
}

Json small_lm(const std::string& placement, int layers, int steps, uint64_t seed, int warmup, int probe_every) {
  return Json{{"model",
               {{"placement", placement},
                {"n_layers", layers},
                {"d_model", 64},
                {"n_heads", 4},
                {"d_ff", 256},
                {"max_seq_len", 64}}},
              {"train",
               {{"batch_size", 16},
                {"seq_len", 64},
                {"steps", steps},
                {"lr", 1e-3},
                {"schedule", "constant"},
                {"warmup", warmup},
                {"beta2", 0.98},
                {"clip", 0.0},
                {"weight_decay", 0.0},
                {"log_every", log_interval(steps)},
                {"eval_every", 0},
                {"eval_batches", 4},
                {"seed", seed},
                {"probe_every", probe_every}}}};
}

Json& use_xavier(Json& config) {
  config["model"]["embed_scale"] = "sqrt_d";
  config["model"]["init"] = {{"scheme", "xavier"}, {"embed_std", 0.0}};
  return config;
}

std::string seed_id(const std::string& arm, int seed) { return fmt::format("{}-s{}", arm, seed); }

Json configured(const StudyOptions& o, Json config, const std::string& key) {
  std::string pointer = "/" + key;
  std::replace(pointer.begin(), pointer.end(), '.', '/');
  const Json::json_pointer at(pointer);
  const auto value = [&](const Json& c) {
    const Json resolved = resolve_config(c, "config");
    return resolved.contains(at) ? resolved.at(at) : Json();
  };
  const Json own = value(config);
  try {
    for (const std::string& assignment : o.overrides) apply_override(config, assignment);
    return value(config);
  } catch (const Error&) {
    return own;  // plan_study refuses the override with its own message
  }
}

int scaled(int value, int preset_steps, int steps) {
  if (value <= 0 || preset_steps <= 0) return value;
  return std::max(1, static_cast<int>(std::lround(double(value) * steps / preset_steps)));
}

TrainPreset configured(const StudyOptions& o, const TrainPreset& p) {
  Json config = small_lm("pre", p.layers, p.steps, 1, 0, p.probe_every);
  const int steps = configured(o, config, "train.steps").get<int>();
  config["train"]["probe_every"] = scaled(p.probe_every, p.steps, steps);
  return {configured(o, config, "model.n_layers").get<int>(), steps,
          configured(o, config, "train.probe_every").get<int>()};
}

std::vector<RunRequest> placement_runs(const std::vector<int>& seeds, std::span<const Arm> arms, const TrainPreset& p,
                                       int warmup, const std::string& analyses) {
  std::vector<RunRequest> runs;
  for (int seed : seeds)
    for (const Arm& a : arms)
      runs.push_back({seed_id(a.id, seed),
                      small_lm(a.id, p.layers, p.steps, static_cast<uint64_t>(seed), warmup, p.probe_every), "train",
                      analyses});
  return runs;
}

const RunOutcome* find_run(const std::vector<RunOutcome>& runs, const std::string& id) {
  for (const RunOutcome& r : runs)
    if (r.request.id == id) return &r;
  return nullptr;
}

double seed_mean(const std::vector<int>& seeds, const std::function<double(int)>& value) {
  return over_seeds(seeds, value).mean();
}

std::vector<double> seed_mean_each(const std::vector<int>& seeds, size_t size,
                                   const std::function<std::vector<double>(int)>& values) {
  std::vector<double> sum(size, 0.0);
  for (int seed : seeds) {
    std::vector<double> v = values(seed);
    v.resize(size, NAN);
    for (size_t i = 0; i < size; ++i) sum[i] += v[i];
  }
  for (double& x : sum) x = seeds.empty() ? NAN : x / static_cast<double>(seeds.size());
  return sum;
}

SeedValues over_seeds(const std::vector<int>& seeds, const std::function<double(int)>& value) {
  SeedValues out{seeds, {}};
  for (int seed : seeds) out.values.push_back(value(seed));
  return out;
}

SeedValues paired(const SeedValues& a, const SeedValues& b, const std::function<double(double, double)>& f) {
  if (a.seeds != b.seeds) throw std::logic_error("paired SeedValues over different seeds");
  SeedValues out{a.seeds, {}};
  for (size_t i = 0; i < a.n(); ++i) out.values.push_back(f(a.values[i], b.values[i]));
  return out;
}

SeedValues ratio(const SeedValues& a, const SeedValues& b) {
  return paired(a, b, [](double x, double y) { return x / y; });
}

SeedValues difference(const SeedValues& a, const SeedValues& b) {
  return paired(a, b, [](double x, double y) { return x - y; });
}

SeedValues each(const SeedValues& a, const std::function<double(double)>& f) {
  SeedValues out{a.seeds, {}};
  for (double v : a.values) out.values.push_back(f(v));
  return out;
}

namespace {

// The dotted keys of a JSON document's leaves ("train.lr") with their values as text.
void flatten(const Json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out[prefix] = j.is_string() ? j.get<std::string>() : j.dump();
}

// The fields that make a run's setup, shown even when every run shares them.
constexpr const char* kSetupFields[] = {
    "model.placement",  "model.n_layers",    "model.d_model",     "model.n_heads",      "model.d_ff",
    "model.norm.type",  "model.init.scheme", "model.embed_scale", "model.positions",    "model.tied_embeddings",
    "train.batch_size", "train.seq_len",     "train.steps",       "train.lr",           "train.schedule",
    "train.warmup",     "train.beta2",       "train.clip",        "train.weight_decay", "train.probe_every",
    "train.seed",       "data.dir"};

}  // namespace

std::string config_summary(const std::vector<RunOutcome>& runs, const std::vector<std::string>& overrides) {
  std::vector<std::string> order;  // fields in key order (the first run's, then any the others add)
  std::map<std::string, std::vector<std::string>> values;  // distinct values in first-seen order ("-": absent)
  std::vector<std::map<std::string, std::string>> flat;
  for (const RunOutcome& r : runs) {
    flatten(r.config, "", flat.emplace_back());
    for (const auto& [key, value] : flat.back())
      if (!values.contains(key)) order.push_back(key), values[key];
  }
  for (const auto& f : flat)
    for (const std::string& key : order) {
      const auto it = f.find(key);
      const std::string v = it == f.end() ? "-" : it->second;
      auto& seen = values[key];
      if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
    }
  std::set<std::string> shown(std::begin(kSetupFields), std::end(kSetupFields));
  for (const std::string& o : overrides) shown.insert(o.substr(0, o.find('=')));
  std::vector<std::string> shared, varied;
  for (const std::string& key : order) {
    const auto& v = values[key];
    if (key == "train.checkpoint_every") continue;  // when a run saves its state does not change its numbers
    if (v.size() > 1) varied.push_back(fmt::format("{} {{{}}}", key, fmt::join(v, ", ")));
    else if (shown.contains(key)) shared.push_back(key + " " + v.front());
  }
  return fmt::format("{} runs. Every run: {}.{}", runs.size(), fmt::join(shared, ", "),
                     varied.empty() ? "" : fmt::format(" Varied between runs: {}.", fmt::join(varied, "; ")));
}

Json run_analysis(const RunOutcome* run, const std::string& analysis) {
  return run && run->status == RunStatus::finished ? read_analysis(run->dir, analysis) : Json();
}

std::string_view layer_prefix(const RunOutcome* run) {
  const bool encoder_decoder = run && run->request.config.contains("model") &&
                               run->request.config["model"].value("shape", "decoder") == "encoder_decoder";
  return encoder_decoder ? "decoder." : "";
}

std::string layer_tensor(const RunOutcome* run, int layer, std::string_view rest) {
  return fmt::format("{}layers.{}.{}", layer_prefix(run), layer, rest);
}

std::vector<double> analysis_column(const RunOutcome* run, const std::string& analysis, const std::string& column) {
  return numbers(run_analysis(run, analysis)[column]);
}

TrainResult train_result(const RunOutcome* run) {
  TrainResult r;
  if (!run) return r.outcome = Outcome::missing, r;
  const TrainCurve curve = read_train_curve(run->dir / "run");
  r.final_loss = curve.final_loss();
  if (const auto s = train::read_run_summary(run->dir / "run")) {
    r.val_loss = s->val_loss;
    r.unigram = s->unigram_entropy_nats;
    r.seconds = s->seconds;
    r.bleu = s->bleu;
  }
  if (run->status == RunStatus::diverged) r.outcome = Outcome::diverged;
  else if (run->status == RunStatus::failed || std::isnan(r.final_loss) || std::isnan(r.unigram))
    r.outcome = Outcome::failed;
  else r.outcome = finished_outcome(curve, r.unigram);
  return r;
}

TrainResult worst_over_seeds(const std::vector<RunOutcome>& runs, const std::vector<int>& seeds,
                             const std::function<std::string(int)>& id_of_seed) {
  TrainResult worst{Outcome::trained};
  std::map<int, TrainResult> each;
  for (int seed : seeds) {
    const TrainResult& r = each[seed] = train_result(find_run(runs, id_of_seed(seed)));
    worst.outcome = std::max(worst.outcome, r.outcome);  // Outcome runs from best to worst
  }
  const auto mean_of = [&](double TrainResult::*field) {
    return seed_mean(seeds, [&](int seed) { return each.at(seed).*field; });
  };
  worst.final_loss = mean_of(&TrainResult::final_loss), worst.val_loss = mean_of(&TrainResult::val_loss);
  return worst;
}

namespace {

// The unigram entropy a run is measured against: its summary's, or for a diverged run (no summary) its
// non_finite record's, or, in runs older than that field, its corpus's.
double unigram_of(const RunOutcome* run, const TrainResult& r) {
  if (!std::isnan(r.unigram) || !run) return r.unigram;
  if (const auto non_finite = train::read_non_finite(run->dir / "run");
      non_finite && !std::isnan(non_finite->unigram_entropy_nats))
    return non_finite->unigram_entropy_nats;
  const fs::path meta = fs::path(run->config["data"]["dir"].get<std::string>()) / "meta.json";
  std::error_code ec;
  if (!fs::is_regular_file(meta, ec)) return NAN;
  return number(parse_json_or_discarded(io::read_file(meta, "corpus meta")), "unigram_entropy_nats");
}

}  // namespace

double final_loss_or_unigram(const RunOutcome* run) {
  const TrainResult r = train_result(run);
  return r.outcome == Outcome::diverged                                  ? unigram_of(run, r)
         : r.outcome == Outcome::failed || r.outcome == Outcome::missing ? NAN
                                                                         : r.final_loss;
}

double val_loss_or_unigram(const RunOutcome* run) {
  const TrainResult r = train_result(run);
  return r.outcome == Outcome::diverged                                  ? unigram_of(run, r)
         : r.outcome == Outcome::failed || r.outcome == Outcome::missing ? NAN
                                                                         : r.val_loss;
}

std::string trained_line() { return fmt::format("the unigram entropy − {:g} nats", train::kStallMargin); }

double loss_above_trained_line(const RunOutcome* run) {
  const TrainResult r = train_result(run);
  return final_loss_or_unigram(run) - (unigram_of(run, r) - train::kStallMargin);
}

Table outcome_table(const std::string& title, const std::vector<RunOutcome>& runs) {
  Table t{title + " (" + stalled_rule() + ")", {"run", "outcome", "final train loss", "val loss", "seconds"}};
  for (const RunOutcome& run : runs) {
    if (run.request.kind != "train") continue;
    const TrainResult r = train_result(&run);
    t.rows.push_back({run.request.id, std::string(outcome_name(r.outcome)), num(r.final_loss), num(r.val_loss),
                      fmt::format("{:.0f}", run.seconds)});
    t.row_class.emplace_back(outcome_name(r.outcome == Outcome::failed ? Outcome::diverged : r.outcome));
  }
  return t;
}

std::vector<Json> probe_records(const fs::path& run_dir, const std::string& family) {
  std::vector<Json> out;
  std::ifstream in(run_dir / "probes.jsonl");
  for (std::string line; std::getline(in, line);) {
    Json j = parse_json_or_discarded(line);
    if (!j.is_discarded() && j.value(probe::field::family, "") == family) out.push_back(std::move(j));
  }
  return out;
}

std::vector<double> numbers(const Json& column) {
  std::vector<double> out;
  if (column.is_array())
    for (const Json& v : column) out.push_back(v.is_number() ? v.get<double>() : NAN);
  return out;
}

double number(const Json& record, const std::string& key) {
  return record.is_object() && record.contains(key) && record[key].is_number() ? record[key].get<double>() : NAN;
}

std::vector<double> numbers(const Json& record, const std::string& key) {
  return record.is_object() && record.contains(key) ? numbers(record[key]) : std::vector<double>{};
}

Series layer_series(const std::string& label, const Json& record, const std::string& column) {
  return {label, numbers(record, "layer"), numbers(record, column)};
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

Truth all_trained(const std::vector<RunOutcome>& runs, const std::string& arm, const std::vector<int>& seeds) {
  Truth all = Truth::holds;
  for (int seed : seeds) {
    const Outcome outcome = train_result(find_run(runs, seed_id(arm, seed))).outcome;
    if (outcome == Outcome::failed || outcome == Outcome::missing) all = all == Truth::fails ? all : Truth::undecided;
    else if (outcome != Outcome::trained) all = Truth::fails;
  }
  return all;
}

SeedValues val_losses(const std::vector<RunOutcome>& runs, const std::string& arm, const std::vector<int>& seeds) {
  return over_seeds(seeds, [&](int seed) { return train_result(find_run(runs, seed_id(arm, seed))).val_loss; });
}

double mean_val_loss(const std::vector<RunOutcome>& runs, const std::string& arm, const std::vector<int>& seeds) {
  return val_losses(runs, arm, seeds).mean();
}

}  // namespace normlab::study
