// The real models' presets (model/presets.h) against tools/torch_reference.py's own table of them, written from
// the papers and configs: each preset at the fixture's tiny sizes resolves to the fixture's config (so the
// torch fixture test, which runs every tests/fixtures/preset_* case, checks the model the preset builds), and
// each trains through `normlab train --preset`.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "model/config.h"
#include "model/presets.h"
#include "train/records.h"
#include "train/tiny_corpus.h"

namespace normlab::model {
namespace {

namespace fs = std::filesystem;

fs::path fixture_config(const std::string& preset) {
  return fs::path(NORMLAB_SOURCE_DIR) / "tests/fixtures" / ("preset_" + preset) / "config.json";
}

TEST(Presets, EachResolvesToItsIndependentTorchFixturesConfig) {
  for (const Preset& p : all_presets()) {
    const fs::path file = fixture_config(p.name);
    ASSERT_TRUE(fs::exists(file)) << p.name << ": no fixture; run tools/torch_reference.py --cases preset_" << p.name;
    Json fixture = Json::parse(std::ifstream(file))["model"];
    Json model = p.model;
    for (const char* key : {"vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_seq_len"})
      model[key] = fixture[key];
    // The fixture lowers Gemma 2's caps (50 / 30) so that tanh is far from linear at its sizes, and evaluates
    // without dropout (the 2017 Transformer's 0.1 is training's).
    if (p.name == "gemma2") model["options"].merge_patch(Json{{"attn_softcap", 5.0}, {"final_softcap", 3.0}});
    if (p.name == "vaswani") model["dropout"] = 0.0;
    Json resolved = to_json(read_model_config(model, "preset " + p.name));
    for (const char* section : {"init", "options"}) {
      for (const auto& [key, value] : fixture[section].items())
        EXPECT_EQ(value, resolved[section][key]) << p.name << ": " << section << "." << key;
      fixture.erase(section), resolved.erase(section);
    }
    // Compared as unordered objects: the reference appends an encoder-decoder's keys in another order.
    EXPECT_EQ(nlohmann::json::parse(fixture.dump()), nlohmann::json::parse(resolved.dump()))
        << p.name << ": normlab's preset differs from the reference's";
  }
}

TEST(Presets, EveryPresetFixtureHasAPresetAndTheListIsTheEightModelsAndThe2017Transformer) {
  std::vector<std::string> names;
  for (const Preset& p : all_presets()) {
    names.push_back(p.name);
    EXPECT_FALSE(p.source.empty()) << p.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"gpt2", "bert", "llama", "qwen2", "deepseek", "glm", "gemma2", "olmo2",
                                             "vaswani"}));
  for (const auto& e : fs::directory_iterator(fs::path(NORMLAB_SOURCE_DIR) / "tests/fixtures")) {
    const std::string dir = e.path().filename().string();
    if (dir.starts_with("preset_")) {
      EXPECT_NO_THROW(find_preset(dir.substr(7))) << dir << " has no preset";
    }
  }
  EXPECT_THROW(find_preset("gpt-3"), Error);
}

TEST(Presets, EachTrainsFromTheCommandLineAndItsLossFalls) {
  using namespace train::testing;
  TempDir tmp("preset");
  for (const Preset& p : all_presets()) {
    const fs::path run = tmp / p.name;
    // A translation model (the 2017 Transformer) trains on the toy sentence pairs; its BLEU on 4 of them.
    const bool pairs = p.model.value("shape", "") == "encoder_decoder";
    const CliResult r = run_cli({"train",
                                 "--preset",
                                 p.name,
                                 "--run",
                                 run.string(),
                                 "--set",
                                 "data.dir=" + (pairs ? tiny_pairs_dir() : tiny_data_dir()).string(),
                                 "--set",
                                 "train.bleu_pairs=4",
                                 "--set",
                                 "model.d_model=32",
                                 "--set",
                                 "model.n_layers=2",
                                 "--set",
                                 "model.n_heads=2",
                                 "--set",
                                 "model.d_ff=64",
                                 "--set",
                                 "model.max_seq_len=16",
                                 "--set",
                                 "train.seq_len=16",
                                 "--set",
                                 "train.batch_size=8",
                                 "--set",
                                 "train.steps=30",
                                 "--set",
                                 "train.lr=3e-3",
                                 "--set",
                                 "train.warmup=5",
                                 "--set",
                                 "train.eval_batches=2",
                                 "--set",
                                 "train.log_every=1"},
                                tmp.path());
    ASSERT_EQ(r.exit_code, 0) << p.name << "\n" << describe(r);
    const Json config = Json::parse(slurp(run / "config.json"))["model"];
    EXPECT_EQ(config["placement"], p.model["placement"]) << p.name;
    EXPECT_EQ(config["norm"]["type"], p.model["norm"]["type"]) << p.name;
    EXPECT_EQ(config["d_model"], 32) << p.name << ": --set overrides the preset's size";
    const auto records = train_records(run);
    ASSERT_EQ(records.size(), 30u);
    EXPECT_LT(records.back().loss, records.front().loss - 0.3) << p.name << ": the loss did not fall";
    if (pairs) {  // a translation preset reports its BLEU and chrF on the held-out pairs (summary.json)
      const auto summary = train::read_run_summary(run);
      ASSERT_TRUE(summary) << p.name;
      EXPECT_EQ(summary->bleu_pairs, 4) << p.name;
      EXPECT_TRUE(std::isfinite(summary->bleu) && summary->bleu >= 0 && summary->bleu <= 100) << p.name;
      EXPECT_TRUE(std::isfinite(summary->chrf) && summary->chrf >= 0 && summary->chrf <= 100) << p.name;
    }
  }
}

TEST(Presets, UnknownPresetIsRefusedListingTheKnownOnes) {
  using namespace train::testing;
  TempDir tmp("preset");
  expect_cli_error(run_cli({"train", "--preset", "gpt-3", "--run", (tmp / "r").string()}, tmp.path()),
                   {"unknown preset 'gpt-3'", "gpt2, bert, llama, qwen2, deepseek, glm, gemma2, olmo2"});
}

}  // namespace
}  // namespace normlab::model
