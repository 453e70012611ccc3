// train.precision = bf16 (engine/gemm.h): a run multiplies bf16 operands, records what it used, tracks the fp32 run
// closely without equalling it, resumes bit for bit, and leaves the process in fp32 when it ends. train.precision =
// fp64: the whole run in double, its checkpoint too, tracking the fp32 run far more closely than bf16 does.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "engine/gemm.h"
#include "io/safetensors.h"
#include "tiny_corpus.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

using testing::slurp;
using testing::TempDir;
using testing::tiny_config_doc;
using testing::train_records;

RunConfig with_precision(int steps, const std::string& precision) {
  Json doc = tiny_config_doc(steps);
  doc["train"]["precision"] = precision;
  return read_run_config(doc, "precision test config");
}

TEST(Precision, Bf16RunTracksFp32AndSaysWhatItUsed) {
  if (!engine::cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 hardware: see FallsBackToFp32WithANote";
  TempDir tmp("precision");
  const TrainSummary fp32 = Trainer(with_precision(30, "fp32"), tmp / "fp32", {}).run();
  const TrainSummary bf16 = Trainer(with_precision(30, "bf16"), tmp / "bf16", {}).run();
  EXPECT_EQ(engine::gemm_precision(), engine::GemmPrecision::fp32);  // the trainer restored the process's precision
  EXPECT_EQ(fp32.precision, "fp32");
  EXPECT_EQ(bf16.precision, "bf16");
  EXPECT_EQ(Json::parse(slurp(tmp / "bf16" / "summary.json")).at("precision"), "bf16");
  EXPECT_EQ(Json::parse(slurp(tmp / "bf16" / "config.json")).at("train").at("precision"), "bf16");
  EXPECT_EQ(Json::parse(slurp(tmp / "fp32" / "config.json")).at("train").at("precision"), "fp32");
  // The same batches and init: the curves differ by bf16's rounding, well under what training moves.
  const auto a = train_records(tmp / "fp32"), b = train_records(tmp / "bf16");
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i].loss, b[i].loss, 0.05) << "step " << a[i].step;
    differs = differs || a[i].loss != b[i].loss;
  }
  EXPECT_TRUE(differs) << "the bf16 run computed exactly the fp32 numbers: its GEMMs did not round";
  EXPECT_LT(bf16.train_loss, a[0].loss - 0.5);  // it learned
  EXPECT_NEAR(bf16.val_loss, fp32.val_loss, 0.05);
}

TEST(Precision, Bf16ResumesBitForBit) {
  if (!engine::cpu_has_bf16()) GTEST_SKIP() << "this CPU has no bf16 hardware";
  TempDir tmp("precision");
  testing::expect_resume_is_exact(with_precision(8, "bf16"), tmp.path());
}

TEST(Precision, Fp64RunComputesInDoubleAndTracksFp32) {
  TempDir tmp("precision");
  const TrainSummary fp32 = Trainer(with_precision(30, "fp32"), tmp / "fp32", {}).run();
  const TrainSummary fp64 = Trainer(with_precision(30, "fp64"), tmp / "fp64", {}).run();
  EXPECT_EQ(fp64.precision, "fp64");
  EXPECT_EQ(Json::parse(slurp(tmp / "fp64" / "summary.json")).at("precision"), "fp64");
  // Weights and optimizer moments are stored as they were computed: in double.
  const auto checkpoint = io::SafetensorsFile::read(tmp / "fp64" / "checkpoint.safetensors");
  int f64_tensors = 0;
  for (const auto& entry : checkpoint.entries()) {
    EXPECT_EQ(entry.dtype, io::Dtype::F64) << entry.name;
    f64_tensors += entry.dtype == io::Dtype::F64;
  }
  EXPECT_GT(f64_tensors, 10);
  // Same batches and init: fp32's rounding is all that separates the curves, far less than bf16's 0.05.
  const auto a = train_records(tmp / "fp32"), b = train_records(tmp / "fp64");
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i].loss, b[i].loss, 1e-3) << "step " << a[i].step;
    differs = differs || a[i].loss != b[i].loss;
  }
  EXPECT_TRUE(differs) << "the fp64 run computed exactly the fp32 numbers: it did not run in double";
  EXPECT_LT(fp64.train_loss, a[0].loss - 0.5);  // it learned
  EXPECT_NEAR(fp64.val_loss, fp32.val_loss, 1e-3);
}

TEST(Precision, Fp64ResumesBitForBit) {
  TempDir tmp("precision");
  testing::expect_resume_is_exact(with_precision(8, "fp64"), tmp.path());
}

TEST(Precision, UnknownPrecisionIsRefusedByName) {
  try {
    with_precision(2, "fp16");
    FAIL() << "fp16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("precision"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();  // the choices
  }
}

TEST(Precision, FallsBackToFp32WithANoteWhereTheCpuLacksBf16) {
  if (engine::cpu_has_bf16()) GTEST_SKIP() << "this CPU has bf16 hardware: the fallback cannot be shown here";
  TempDir tmp("precision");
  std::ostringstream progress;
  const TrainSummary s = Trainer(with_precision(3, "bf16"), tmp / "run", {false, -1, &progress}).run();
  EXPECT_EQ(s.precision, "fp32");
  EXPECT_NE(progress.str().find("running fp32"), std::string::npos) << progress.str();
}

}  // namespace
}  // namespace normlab::train
