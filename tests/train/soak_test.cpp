// The kill -9 soak: a training run with a checkpoint every 2 steps is SIGKILLed at random moments many
// times and resumed each time; its final checkpoint (every tensor, the optimizer's moments included) and
// every logged line equal an uninterrupted run's, byte for byte. The moments are seeded, so a failure
// repeats. NORMLAB_SOAK_KILLS sets the number of kills (default 7; scripts/soak.sh runs 30).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "io/safetensors.h"
#include "train/tiny_corpus.h"

namespace normlab::train::testing {
namespace {

using Clock = std::chrono::steady_clock;

int soak_kills(int fallback) {
  const char* text = std::getenv("NORMLAB_SOAK_KILLS");
  return text && std::atoi(text) > 0 ? std::atoi(text) : fallback;
}

// metrics.jsonl without the wall-clock fields (elapsed_s, tokens_per_s), one dumped line per record: what
// must be identical between a killed-and-resumed run and an uninterrupted one.
std::vector<std::string> logged_lines(const fs::path& run) {
  std::vector<std::string> out;
  for (auto j : read_metrics(run)) {
    j.erase("elapsed_s");
    j.erase("tokens_per_s");
    out.push_back(j.dump());
  }
  return out;
}

void expect_identical_checkpoints(const fs::path& a, const fs::path& b) {
  const auto x = io::SafetensorsFile::read(a / "checkpoint.safetensors");
  const auto y = io::SafetensorsFile::read(b / "checkpoint.safetensors");
  ASSERT_EQ(x.names(), y.names());
  for (const auto& e : x.entries()) {
    const auto& f = y.at(e.name);
    EXPECT_EQ(e.dtype, f.dtype) << e.name;
    EXPECT_EQ(e.shape, f.shape) << e.name;
    ASSERT_EQ(e.data.size(), f.data.size()) << e.name;
    EXPECT_TRUE(std::equal(e.data.begin(), e.data.end(), f.data.begin())) << "tensor " << e.name << " differs";
  }
  EXPECT_EQ(x.metadata(), y.metadata());
}

TEST(KillSoak, TrainingKilledAtRandomMomentsEndsBitIdentical) {
  const int kills = soak_kills(7);
  TempDir tmp("soak");
  Json config = tiny_config_doc(40);
  config["train"]["checkpoint_every"] = 2;
  config["train"]["eval_every"] = 10;
  const fs::path config_file = tmp / "config.json";
  spit(config_file, config.dump());

  const fs::path straight = tmp / "straight";
  const auto t0 = Clock::now();
  const auto s = run_cli({"train", "--config", config_file.string(), "--run", straight.string()}, tmp.path());
  ASSERT_EQ(s.exit_code, 0) << describe(s);
  const double full_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  // The start-up (process, token data, model, first step, a checkpoint): a run stopped after step 1.
  const auto t1 = Clock::now();
  const auto p =
      run_cli({"train", "--config", config_file.string(), "--run", (tmp / "startup").string(), "--stop-after", "1"},
              tmp.path());
  ASSERT_EQ(p.exit_code, 0) << describe(p);
  const double startup_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();

  // Each kill comes at a random moment: somewhere around the end of the start-up, plus a random share of
  // the training time small enough that the kills, together, fall before the run ends.
  const fs::path run = tmp / "killed";
  std::mt19937_64 rng(20261130);
  std::uniform_real_distribution<double> in_startup(0.3, 1.1), in_training(0.0, 1.6 / kills);
  const double training_ms = std::max(full_ms - startup_ms, 1.0);
  int interrupted = 0;
  for (int k = 0; k < kills; ++k) {
    const bool resume = fs::exists(run / "checkpoint.safetensors");
    const std::vector<std::string> args =
        resume ? std::vector<std::string>{"train", "--run", run.string(), "--resume"}
               : std::vector<std::string>{"train", "--config", config_file.string(), "--run", run.string()};
    const auto deadline = Clock::now() + std::chrono::duration<double, std::milli>(in_startup(rng) * startup_ms +
                                                                                   in_training(rng) * training_ms);
    const pid_t pid = start_cli(args, tmp / "killed.log");
    ASSERT_GT(pid, 0);
    int status = 0;
    bool exited = false;
    while (Clock::now() < deadline && !(exited = cli_exited(pid, &status)))
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (exited) {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(tmp / "killed.log");
      if (fs::exists(run / "summary.json")) break;  // it finished before the kill
      continue;
    }
    kill_cli(pid);
    ++interrupted;
  }
  if (!fs::exists(run / "summary.json")) {
    const bool resume = fs::exists(run / "checkpoint.safetensors");
    const auto r = resume ? run_cli({"train", "--run", run.string(), "--resume"}, tmp.path())
                          : run_cli({"train", "--config", config_file.string(), "--run", run.string()}, tmp.path());
    ASSERT_EQ(r.exit_code, 0) << describe(r);
  }
  EXPECT_GE(interrupted, (kills + 1) / 2) << "most kills came after the run had finished: nothing was soaked";
  std::cerr << "soak: " << interrupted << " of " << kills << " kills interrupted the run (uninterrupted run " << full_ms
            << " ms, start-up " << startup_ms << " ms)\n";

  expect_identical_records(train_records(straight), train_records(run));
  EXPECT_EQ(logged_lines(straight), logged_lines(run));
  expect_identical_checkpoints(straight, run);
  const Json a = Json::parse(slurp(straight / "summary.json")), b = Json::parse(slurp(run / "summary.json"));
  EXPECT_EQ(a["val_loss"], b["val_loss"]);
  EXPECT_EQ(a["train_loss"], b["train_loss"]);
}

}  // namespace
}  // namespace normlab::train::testing
