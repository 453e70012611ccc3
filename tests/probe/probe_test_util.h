#pragma once
// Shared helpers for the probe tests: a scratch directory, a small token dataset prepared once per
// test process from generated text (vocab 120), tiny run configs, file readers and a CLI runner.
// Self-contained (namespace normlab::probe::testing) so that it does not depend on other test folders.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/graph.h"
#include "io/corpus.h"
#include "model/init.h"
#include "model/transformer.h"
#include "train/loader.h"
#include "train/tiny_corpus.h"
#include "train/train_config.h"

namespace normlab::probe::testing {

namespace fs = std::filesystem;
using nlohmann::json;

// Shared with the train/cli tests: a self-removing temp dir and whole-file reads.
using train::testing::slurp;
using train::testing::TempDir;

inline std::vector<std::string> lines_of(const fs::path& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// One parsed JSON value per line (probes.jsonl, metrics.jsonl).
inline std::vector<json> read_jsonl(const fs::path& path) {
  std::vector<json> out;
  for (const auto& line : lines_of(path)) out.push_back(json::parse(line));
  return out;
}

// Generated, varied text (the same generator as the train tests', another seed).
inline std::string generated_text(int lines = 400, std::uint64_t seed = 29) {
  return train::testing::tiny_corpus_text(lines, seed);
}

inline constexpr int kVocab = 120;

// A token directory prepared once per test process (removed at exit).
inline const fs::path& data_dir() {
  static const std::unique_ptr<TempDir> dir = [] {
    auto d = std::make_unique<TempDir>("probe_data");
    {
      std::ofstream out(*d / "corpus.txt", std::ios::binary);
      out << generated_text();
    }
    io::PrepareOptions o;
    o.inputs = {(*d / "corpus.txt").string()};
    o.out_dir = (*d / "tokens").string();
    o.vocab_size = kVocab;
    o.val_fraction = 0.1;
    io::prepare_corpus(o);
    return d;
  }();
  static const fs::path tokens = dir->path() / "tokens";
  return tokens;
}

// The loaded tokens of data_dir(), once per process.
inline const io::TokenData& tokens() {
  static const io::TokenData data = io::load_tokens(data_dir());
  return data;
}

// A tiny run: d 32, 2 layers, 2 heads, d_ff 64, seq 16, batch 4, constant lr 3e-3 without warm-up,
// logs every step, evaluates and checkpoints only at the end, 2 threads. `model` is merged into the
// model section (e.g. {"placement": "rezero"}), `train` into the train section.
inline train::RunConfig tiny_run(const json& model = json::object(), const json& train = json::object()) {
  json doc{{"model", {{"d_model", 32}, {"n_layers", 2}, {"n_heads", 2}, {"d_ff", 64}, {"max_seq_len", 16}}},
           {"data", {{"dir", data_dir().string()}}},
           {"train",
            {{"batch_size", 4},
             {"seq_len", 16},
             {"steps", 4},
             {"lr", 3e-3},
             {"schedule", "constant"},
             {"warmup", 0},
             {"eval_every", 0},
             {"eval_batches", 2},
             {"checkpoint_every", 0},
             {"log_every", 1},
             {"threads", 2}}}};
  if (model.is_object()) doc["model"].update(model);  // a defaulted `{}` argument arrives as null
  if (train.is_object()) doc["train"].update(train);
  train::RunConfig c = train::read_run_config(doc, "probe test config");
  c.model.vocab_size = tokens().vocab_size;
  return c;
}

inline train::Loader make_loader(const train::RunConfig& c) {
  return train::Loader(tokens().train, tokens().val, c.train.batch_size, c.train.seq_len, c.train.seed);
}

// A model of the config, initialized with the run's seed (as `normlab probe` does for a fresh init).
inline std::unique_ptr<model::Model> fresh_model(const train::RunConfig& c, engine::DType dtype = engine::DType::f32) {
  auto m = model::build_model(c.model, c.train.batch_size, c.train.seq_len, dtype);
  model::initialize(*m, c.train.seed);
  return m;
}

// Every value of a float tensor (data or gradient) as fp64.
inline std::vector<double> values(const engine::Graph& g, engine::TensorId id, bool grad = false) {
  return engine::to_f64(g, id, grad);
}

inline double l2(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// The raw bytes of a tensor's data or gradient buffer (for "nothing changed" checks).
inline std::string raw_bytes(const engine::Graph& g, engine::TensorId id, bool grad = false) {
  const auto& s = g.spec(id);
  const void* p = grad ? s.grad : s.data;
  return p ? std::string(static_cast<const char*>(p), s.bytes()) : std::string();
}

// The records of probes.jsonl with the given family, in file order.
inline std::vector<json> family(const std::vector<json>& records, std::string_view name) {
  std::vector<json> out;
  for (const auto& r : records)
    if (r.at("family") == name) out.push_back(r);
  return out;
}

// Index of `name` in a record's "name" column; fails the test if absent.
inline size_t index_of(const json& record, const std::string& name) {
  const auto& names = record.at("name");
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return i;
  ADD_FAILURE() << "no entry '" << name << "' in " << record.at("family") << " record of step " << record.at("step");
  return 0;
}

// The CLI binary, run as the train/cli tests run it.
using train::testing::CliResult;
using train::testing::run_cli;

}  // namespace normlab::probe::testing
