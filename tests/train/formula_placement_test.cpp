// Faithful by construction: each single-stream built-in placement written as a formula (examples/placements/my-*.json)
// trains bit for bit like the built-in, in every shape: after 5 fp32 steps the two checkpoints hold the same tensors
// byte for byte (weights and both AdamW moments) and the same logged losses, learning rates and gradient norms. Only
// their configs differ: the formula's run records the formula's object as model.placement.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "tiny_corpus.h"

namespace normlab::train {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string builtin, example;
};
// How GoogleTest names a case in its output and in ctest's list (otherwise a dump of the object's bytes).
void PrintTo(const Case& c, std::ostream* out) { *out << c.builtin << " as " << c.example << ".json"; }

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"post", "my-post"},   {"pre", "my-pre"},     {"deepnorm", "my-deepnorm"}, {"sandwich", "my-sandwich"},
      {"peri", "my-peri"},   {"lns", "my-lns"},     {"rezero", "my-rezero"},     {"subln", "my-subln"},
      {"mixln", "my-mixln"}, {"admin", "my-admin"},
  };
  return all;
}

fs::path example(const std::string& name) {
  return fs::path(NORMLAB_SOURCE_DIR) / "examples" / "placements" / (name + ".json");
}

// Every tensor of a checkpoint by name: its dtype, shape and bytes.
std::map<std::string, std::string> tensors(const fs::path& checkpoint) {
  const io::SafetensorsFile file = io::SafetensorsFile::read(checkpoint);
  std::map<std::string, std::string> out;
  for (const auto& e : file.entries()) {
    std::string shape;
    for (int64_t d : e.shape) shape += std::to_string(d) + ",";
    out[e.name] = std::string(io::dtype_name(e.dtype)) + "[" + shape + "]" +
                  std::string(reinterpret_cast<const char*>(e.data.data()), e.data.size());
  }
  return out;
}

// 4 layers (so that Mix-LN's ⌊L/4⌋ Post-LN layers are one), 5 steps; an encoder-decoder of 3 + 4 layers (each
// stack its own constants) on the toy pairs, without the BLEU of held-out pairs at the end.
Json run_doc(const std::string& shape, const Json& placement) {
  Json doc =
      testing::tiny_config_doc(5, shape == "encoder_decoder" ? testing::tiny_pairs_dir() : testing::tiny_data_dir());
  doc["model"]["n_layers"] = 4;
  doc["model"]["shape"] = shape;
  if (shape == "encoder_decoder") {
    doc["model"]["encoder_layers"] = 3;
    doc["train"]["bleu_pairs"] = 0;  // the translations at the end are the same function of the same weights
  }
  doc["model"]["placement"] = placement;
  return doc;
}

class FormulaPlacement : public ::testing::TestWithParam<std::tuple<Case, std::string>> {};

TEST_P(FormulaPlacement, TrainsBitForBitLikeTheBuiltIn) {
  const auto& [c, shape] = GetParam();
  testing::TempDir tmp("formula");
  const std::string file = "@" + example(c.example).string();
  Trainer(read_run_config(run_doc(shape, c.builtin), "built-in"), tmp / "builtin", {}).run();
  Trainer(read_run_config(run_doc(shape, file), "formula"), tmp / "formula", {}).run();

  const auto builtin = tensors(tmp / "builtin" / kCheckpointFile), formula = tensors(tmp / "formula" / kCheckpointFile);
  ASSERT_EQ(builtin.size(), formula.size());
  for (const auto& [name, data] : builtin) {
    ASSERT_TRUE(formula.contains(name)) << name << " is missing from the formula's checkpoint";
    EXPECT_TRUE(formula.at(name) == data) << name << " differs";
  }
  testing::expect_identical_records(testing::train_records(tmp / "builtin"), testing::train_records(tmp / "formula"));
  // The run records the formula itself, so that rerunning it needs no file.
  const Json recorded = Json::parse(testing::slurp(tmp / "formula" / "config.json"));
  EXPECT_EQ(recorded["model"]["placement"], Json::parse(testing::slurp(example(c.example))));
  const Json metadata =
      Json::parse(io::SafetensorsFile::read(tmp / "formula" / kCheckpointFile).metadata().at("config"));
  EXPECT_EQ(metadata["model"]["placement"], recorded["model"]["placement"]);
}

INSTANTIATE_TEST_SUITE_P(Examples, FormulaPlacement,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::Values("decoder", "encoder", "encoder_decoder")),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param).builtin + "_" + std::get<1>(info.param);
                           return name;
                         });

// A formula is read where any run config is, and a run resumes from its own config.json alone.
TEST(FormulaPlacementRun, ResumesFromItsRecordedFormula) {
  testing::TempDir tmp("formula_resume");
  Json doc = run_doc("decoder", "@" + example("my-deepnorm").string());
  doc["train"]["steps"] = 8;
  testing::expect_resume_is_exact(read_run_config(doc, "formula"), tmp.path());
}

}  // namespace
}  // namespace normlab::train
