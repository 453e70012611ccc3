// The model against independent PyTorch references (tools/torch_reference.py, committed fixtures):
// loss, logits and every parameter gradient must match to ≤ 1e-5 relative error in fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "io/safetensors.h"
#include "model/placement.h"
#include "model/weights.h"

namespace normlab::model {
namespace {

namespace fs = std::filesystem;

double relative_error(const float* got, const std::vector<double>& want) {
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff2 += (got[i] - want[i]) * (got[i] - want[i]);
    ref2 += want[i] * want[i];
  }
  return std::sqrt(diff2 / std::max(ref2, 1e-30));
}

std::vector<fs::path> fixture_dirs() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(fs::path(NORMLAB_SOURCE_DIR) / "tests/fixtures"))
    if (e.is_directory() && fs::exists(e.path() / "data.safetensors")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

class TorchFixture : public ::testing::TestWithParam<fs::path> {};

TEST_P(TorchFixture, LossLogitsAndEveryGradientMatch) {
  const fs::path dir = GetParam();
  Json config = Json::parse(std::ifstream(dir / "config.json"));
  ModelConfig mc = read_model_config(config["model"], (dir / "config.json").string() + ": model");
  const int batch = config["batch_size"].get<int>(), seq = config["seq_len"].get<int>();
  auto m = build_model(mc, batch, seq);
  auto data = io::SafetensorsFile::read(dir / "data.safetensors");
  load_weights(*m, data, {"grad/"});
  auto tokens = data.at("tokens").copy_as<int32_t>(), targets = data.at("targets").copy_as<int32_t>();
  m->set_batch(tokens.data(), targets.data());
  if (data.find("source")) {  // an encoder-decoder (encdec_*): the padded source and its lengths
    auto source = data.at("source").copy_as<int32_t>(), lengths = data.at("source_lengths").copy_as<int32_t>();
    m->set_source(source.data(), lengths.data());
  }

  m->graph.zero_param_grads();
  const double loss = m->forward(false);
  m->graph.backward(m->loss);

  const double want_loss = data.at("loss").to_f64_vector()[0];
  EXPECT_LE(std::abs(loss - want_loss) / std::abs(want_loss), 1e-5) << "loss " << loss << " vs torch " << want_loss;
  EXPECT_LE(relative_error(m->graph.data<float>(m->logits), data.at("logits").to_f64_vector()), 1e-5) << "logits";
  int checked = 0;
  for (engine::TensorId id : m->graph.parameters()) {
    const auto& p = m->graph.spec(id);
    const auto want = data.at("grad/" + p.name).to_f64_vector();
    const float* got = m->graph.grad<float>(id);
    double want_norm = 0, got_norm = 0;
    for (size_t i = 0; i < want.size(); ++i) want_norm += want[i] * want[i], got_norm += double(got[i]) * got[i];
    if (std::sqrt(want_norm) < 1e-12) {
      // The key bias adds q·b_k to every score of a row, which softmax ignores: its exact gradient
      // is 0, and fp32 leaves only rounding noise, so relative error is meaningless there.
      EXPECT_LE(std::sqrt(got_norm), 1e-6) << "grad of " << p.name << " should be zero";
    } else {
      // A small parameter's gradient (a learned scale: QK-norm's, NormFormer's per-head γ) sums every score of every
      // row in fp32, so its rounding is that of a long sum: 1.2e-5 on a Zen 3 CPU, whose kernels fuse differently.
      EXPECT_LE(relative_error(got, want), want.size() <= 64 ? 3e-5 : 1e-5) << "grad of " << p.name;
    }
    ++checked;
  }
  int fixture_grads = 0;
  for (const auto& name : data.names()) fixture_grads += name.starts_with("grad/");
  EXPECT_EQ(checked, fixture_grads) << "the model and the fixture disagree on the parameter set";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TorchFixture, ::testing::ValuesIn(fixture_dirs()),
                         [](const auto& info) { return info.param.filename().string(); });

// Each `variant_<placement>` fixture is that placement with its defaults (tests/fixtures/README.md):
// its fully explicit config.json equals what normlab resolves from the sizes and the placement alone,
// except the changes the README lists (Gemma 2's lowered soft-caps). `init` and `options` are compared
// key by key for the keys the fixture writes (it writes the four model-level switches and the
// placement's own; absent keys read as their defaults); the weights are the fixture's own draws.
TEST(TorchFixtureConfigs, PlacementCasesUseThePlacementDefaults) {
  int checked = 0;
  for (const Placement* p : all_placements()) {
    const fs::path file =
        fs::path(NORMLAB_SOURCE_DIR) / "tests/fixtures" / ("variant_" + std::string(p->name)) / "config.json";
    ASSERT_TRUE(fs::exists(file)) << file;
    Json fixture = Json::parse(std::ifstream(file))["model"];
    Json sizes = Json::object();
    for (const char* key : {"vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_seq_len", "placement"})
      sizes[key] = fixture[key];
    Json resolved = to_json(read_model_config(sizes, "defaults"));
    if (!fixture.contains("shape")) {  // written before encoders existed: a decoder
      EXPECT_EQ(resolved["shape"], "decoder");
      resolved.erase("shape");
    }
    if (p->name == "gemma2") resolved["options"].merge_patch(Json{{"attn_softcap", 5.0}, {"final_softcap", 3.0}});
    for (const char* section : {"init", "options"}) {
      for (const auto& [key, value] : fixture[section].items())
        EXPECT_EQ(value, resolved[section][key]) << p->name << ": " << section << "." << key;
      fixture.erase(section), resolved.erase(section);
    }
    EXPECT_EQ(fixture, resolved) << p->name << ": the fixture's config differs from the placement's defaults";
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(all_placements().size()));
}

}  // namespace
}  // namespace normlab::model
