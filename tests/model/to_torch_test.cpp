// tools/to_torch.py: a run's checkpoint loaded into PyTorch (the independent reference's module for its
// config.json) computes normlab's logits. Needs Debian's python3-torch (scripts/setup.sh --with-torch); without
// it the test skips and says so.
#include <gtest/gtest.h>

#include "train/tiny_corpus.h"

namespace normlab::train::testing {
namespace {

bool torch_available() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

TEST(ToTorch, ACheckpointLoadedIntoPyTorchGivesNormlabsLogits) {
  if (!torch_available()) GTEST_SKIP() << "python3-torch is not installed (scripts/setup.sh --with-torch)";
  TempDir tmp("to_torch");
  const std::vector<std::vector<std::string>> runs = {
      {},                      // the default Pre-LN model
      {"--preset", "qwen2"},   // RMSNorm, SwiGLU, RoPE, q/k/v biases only
      {"--preset", "gemma2"},  // sandwich, (1 + γ) RMSNorm, soft-caps
      {"--preset", "olmo2"},   // QK-norm, norms on the outputs, an untied head
      {"--set", "model.shape=encoder", "--set", "model.placement=post"}};  // a Post-LN masked LM
  int index = 0;
  for (const auto& extra : runs) {
    const fs::path run = tmp / ("run" + std::to_string(index++));
    std::vector<std::string> args = {"train", "--run", run.string(), "--set", "data.dir=" + tiny_data_dir().string()};
    for (const char* s :
         {"model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.max_seq_len=16",
          "train.seq_len=16", "train.batch_size=4", "train.steps=5", "train.eval_batches=1"})
      args.insert(args.end(), {"--set", s});
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult trained = run_cli(args, tmp.path());
    ASSERT_EQ(trained.exit_code, 0) << describe(trained);
    const fs::path logits = tmp / "logits.safetensors";
    const CliResult eval =
        run_cli({"eval", "--run", run.string(), "--batches", "1", "--logits", logits.string()}, tmp.path());
    ASSERT_EQ(eval.exit_code, 0) << describe(eval);
    const CliResult check =
        run_captured("/usr/bin/python3 " + shell_quote(NORMLAB_SOURCE_DIR "/tools/to_torch.py") + " " +
                         shell_quote(run.string()) + " --check " + shell_quote(logits.string()),
                     tmp.path());
    EXPECT_EQ(check.exit_code, 0) << describe(check);
    EXPECT_NE(check.out.find("relative L2 error"), std::string::npos) << describe(check);
  }
}

}  // namespace
}  // namespace normlab::train::testing
