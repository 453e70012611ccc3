// probes.jsonl / probes.csv as docs/probes.md specifies them: one record per family per probe step,
// every record with `step` and `family` and columns of equal length; the CSV the same numbers in
// long form; no files at all with probing off; a resumed run rewrites the records after its checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "probe_test_util.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace normlab::probe {
namespace {

using namespace testing;

const std::vector<std::string> kFamilies = {"stream", "branch", "norm",   "param",
                                            "scalar", "loss",   "update", "model_update"};

void train_run(const train::RunConfig& c, const fs::path& dir, bool resume = false, int stop_after = -1) {
  train::Trainer(c, dir, {resume, stop_after, nullptr}).run();
}

// The CSV rows a record stands for: one per (entry, quantity); scalar fields are one row each.
std::multiset<std::string> expected_csv_rows(const json& record) {
  std::multiset<std::string> rows;
  const int step = record.at("step").get<int>();
  const std::string fam = record.at("family").get<std::string>();
  auto id = [&](const char* key, size_t i) {
    if (!record.contains(key) || !record[key].is_array()) return std::string();
    const json& v = record[key][i];
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  for (const auto& [quantity, v] : record.items()) {
    if (quantity == "step" || quantity == "family" || quantity == "name" || quantity == "layer" ||
        quantity == "sublayer")
      continue;
    if (!v.is_array()) {
      rows.insert(fmt::format("{},{},,,,{},{}", step, fam, quantity, v.dump()));
      continue;
    }
    for (size_t i = 0; i < v.size(); ++i)
      rows.insert(fmt::format("{},{},{},{},{},{},{}", step, fam, id("name", i), id("layer", i), id("sublayer", i),
                              quantity, v[i].dump()));
  }
  return rows;
}

TEST(ProbeFiles, JsonlRecordsFollowTheSchemaAndTheCsvHoldsTheSameNumbers) {
  TempDir tmp;
  // GPAS has every family, the scalar one included (its gates).
  const train::RunConfig c = tiny_run({{"placement", "gpas"}}, {{"steps", 6}, {"probe_every", 2}});
  train_run(c, tmp / "run");
  const fs::path run = tmp / "run";
  ASSERT_TRUE(fs::exists(run / "probe_reference.safetensors"));

  const std::vector<std::string> lines = lines_of(run / "probes.jsonl");
  ASSERT_EQ(lines.size(), 4 * kFamilies.size());
  std::vector<json> records;
  for (const auto& line : lines) {
    json j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    ASSERT_TRUE(j.is_object()) << line;
    ASSERT_TRUE(j.contains("step") && j["step"].is_number_integer()) << line;
    ASSERT_TRUE(j.contains("family") && j["family"].is_string()) << line;
    records.push_back(std::move(j));
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const json& r = records[i];
    // Probe steps 1 (the state at init), 2, 4, 6; at each, the families in the documented order.
    const int probe = static_cast<int>(i / kFamilies.size());
    EXPECT_EQ(r["step"].get<int>(), probe == 0 ? 1 : 2 * probe) << lines[i];
    EXPECT_EQ(r["family"].get<std::string>(), kFamilies[i % kFamilies.size()]) << lines[i];
    // Columns: arrays of equal length; the loss and model_update families carry single values.
    size_t length = 0;
    int columns = 0;
    for (const auto& [key, v] : r.items()) {
      if (key == "step" || key == "family") continue;
      ++columns;
      if (!v.is_array()) {
        EXPECT_TRUE(r["family"] == "loss" || r["family"] == "model_update") << key << " in " << lines[i];
        EXPECT_TRUE(v.is_number()) << key << " in " << lines[i];
        continue;
      }
      if (length == 0) length = v.size();
      EXPECT_EQ(v.size(), length) << "column " << key << " in " << lines[i];
      EXPECT_GT(v.size(), 0u) << key;
      for (const auto& x : v)
        EXPECT_TRUE(x.is_number() || (x.is_string() && (key == "name" || key == "sublayer")))
            << key << " in " << lines[i];
    }
    EXPECT_GT(columns, 0) << lines[i];
  }
  // Sizes: L + 1 stream entries, 2L branches, every norm (2 per layer + final), every parameter.
  auto model = model::build_model(c.model, c.train.batch_size, c.train.seq_len);
  const std::map<std::string, size_t> sizes = {{"stream", 3}, {"branch", 4},
                                               {"norm", 5},   {"param", model->graph.parameters().size()},
                                               {"scalar", 2}, {"update", model->graph.parameters().size()}};
  for (const auto& r : records) {
    const std::string fam = r["family"].get<std::string>();
    if (!sizes.contains(fam)) continue;
    const json& first = r.contains("name") ? r["name"] : r["layer"];
    EXPECT_EQ(first.size(), sizes.at(fam)) << fam;
  }
  const auto docs_columns =
      std::map<std::string, std::set<std::string>>{{"stream", {"layer", "mean_square", "rms", "max_abs", "grad_norm"}},
                                                   {"branch", {"layer", "sublayer", "rms", "max_abs"}},
                                                   {"norm", {"name", "inv_sigma", "input_rms"}},
                                                   {"param", {"name", "weight_norm", "grad_norm"}},
                                                   {"scalar", {"name", "value"}},
                                                   {"loss", {"loss", "grad_norm"}},
                                                   {"update", {"name", "update_norm", "update_ratio"}},
                                                   {"model_update", {"logit_change_rms"}}};
  for (const auto& r : records) {
    std::set<std::string> keys;
    for (const auto& [key, v] : r.items())
      if (key != "step" && key != "family") keys.insert(key);
    EXPECT_EQ(keys, docs_columns.at(r["family"].get<std::string>())) << r["family"];
  }

  // probes.csv: the documented header, 7 fields a row, one row per value of the JSONL records.
  const std::vector<std::string> csv = lines_of(run / "probes.csv");
  ASSERT_FALSE(csv.empty());
  EXPECT_EQ(csv[0], "step,family,name,layer,sublayer,quantity,value");
  std::multiset<std::string> expected, got(csv.begin() + 1, csv.end());
  for (const auto& r : records) expected.merge(expected_csv_rows(r));
  EXPECT_EQ(got.size(), expected.size());
  for (const auto& row : got) EXPECT_EQ(std::count(row.begin(), row.end(), ','), 6) << row;
  std::vector<std::string> missing, extra;
  std::set_difference(expected.begin(), expected.end(), got.begin(), got.end(), std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), expected.begin(), expected.end(), std::back_inserter(extra));
  EXPECT_TRUE(missing.empty()) << missing.size() << " values of probes.jsonl are not in probes.csv, e.g. "
                               << missing.front();
  EXPECT_TRUE(extra.empty()) << extra.size() << " rows of probes.csv are not in probes.jsonl, e.g. " << extra.front();
}

TEST(ProbeFiles, ProbingOffWritesNoProbeFiles) {
  TempDir tmp;
  const train::RunConfig c = tiny_run({{"placement", "gpas"}}, {{"steps", 3}});
  ASSERT_EQ(c.train.probe_every, 0);
  train_run(c, tmp / "run");
  EXPECT_TRUE(fs::exists(tmp / "run" / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(tmp / "run" / "probes.jsonl"));
  EXPECT_FALSE(fs::exists(tmp / "run" / "probes.csv"));
  EXPECT_FALSE(fs::exists(tmp / "run" / "probe_reference.safetensors"));
}

// `normlab probe --run`: one analysis.jsonl record per analysis asked for, columns of equal length,
// and analysis.csv with its documented header.
TEST(ProbeFiles, CliProbeWritesOneRecordPerAnalysis) {
  TempDir tmp;
  train_run(tiny_run({{"placement", "pre"}}, {{"steps", 2}}), tmp / "run");
  const std::vector<std::string> analyses = {"grad-init", "one-step", "angular", "layer-drop", "attention-entropy"};
  std::string list;
  for (const auto& a : analyses) list += (list.empty() ? "" : ",") + a;
  const CliResult r = run_cli({"probe", "--run", (tmp / "run").string(), "--analysis", list, "--batches", "1",
                               "--seeds", "1", "--out", (tmp / "out").string()},
                              tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto records = read_jsonl(tmp / "out" / "analysis.jsonl");
  ASSERT_EQ(records.size(), analyses.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].at("analysis").get<std::string>(), analyses[i]);
    const json& result = records[i].at("result");
    size_t length = 0;
    for (const auto& [key, v] : result.items()) {
      if (!v.is_array()) continue;
      if (length == 0) length = v.size();
      EXPECT_EQ(v.size(), length) << analyses[i] << "." << key;
    }
  }
  const auto csv = lines_of(tmp / "out" / "analysis.csv");
  ASSERT_GT(csv.size(), 1u);
  EXPECT_EQ(csv[0], "analysis,name,layer,head,quantity,value");
  for (size_t i = 1; i < csv.size(); ++i) EXPECT_EQ(std::count(csv[i].begin(), csv[i].end(), ','), 5) << csv[i];
}

// A run resumed from an older checkpoint (as after a crash: records were written past it) drops the
// records after the checkpoint and writes them again, against the same θ_0 reference: the files end
// up byte-identical to those of a straight run.
TEST(ProbeFiles, ResumeFromAnOlderCheckpointRewritesTheLaterRecords) {
  TempDir tmp;
  const train::RunConfig c = tiny_run({{"placement", "rezero"}}, {{"steps", 6}, {"probe_every", 1}});
  const fs::path straight = tmp / "straight", split = tmp / "split", saved = tmp / "saved";
  train_run(c, straight);

  train_run(c, split, false, 2);
  fs::create_directories(saved);
  for (const char* f : {train::kCheckpointFile, train::kCheckpointJson}) fs::copy_file(split / f, saved / f);
  train_run(c, split, true, 4);  // records of steps 3 and 4, then "crash" back to the step-2 checkpoint
  ASSERT_EQ(family(read_jsonl(split / "probes.jsonl"), "loss").size(), 4u);
  for (const char* f : {train::kCheckpointFile, train::kCheckpointJson})
    fs::copy_file(saved / f, split / f, fs::copy_options::overwrite_existing);
  train_run(c, split, true);

  EXPECT_EQ(slurp(split / "probes.jsonl"), slurp(straight / "probes.jsonl"));
  EXPECT_EQ(slurp(split / "probes.csv"), slurp(straight / "probes.csv"));
  EXPECT_EQ(slurp(split / "probe_reference.safetensors"), slurp(straight / "probe_reference.safetensors"));
  EXPECT_EQ(family(read_jsonl(split / "probes.jsonl"), "loss").size(), 6u);
}

}  // namespace
}  // namespace normlab::probe
