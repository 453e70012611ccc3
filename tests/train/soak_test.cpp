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
#include "train/records.h"
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

// The last step metrics.jsonl records (0 when there is none yet); a line torn by a kill is skipped.
int last_logged_step(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  int step = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = Json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("step") && j["step"].is_number_integer()) step = j["step"].get<int>();
  }
  return step;
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
  // Steps enough for every kill to land before the end (a kill moves the run on by a few steps at least).
  Json config = tiny_config_doc(std::max(40, 4 * kills));
  config["train"]["checkpoint_every"] = 2;
  config["train"]["eval_every"] = 10;
  const fs::path config_file = tmp / "config.json";
  spit(config_file, config.dump());

  const fs::path straight = tmp / "straight";
  const auto t0 = Clock::now();
  const auto s = run_cli({"train", "--config", config_file.string(), "--run", straight.string()}, tmp.path());
  ASSERT_EQ(s.exit_code, 0) << describe(s);
  const double full_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  // Each kill comes at a seeded random point of the run's progress, never at a clock time (a loaded machine
  // would move every moment): every third during the start-up (at once, or once the trainer holds its run
  // folder: its model is built), the others once the run has logged a random step between its last log and an
  // even share of the steps left, so that the kills spread over the whole run whatever the machine's speed.
  const fs::path run = tmp / "killed";
  const int steps = config["train"]["steps"].get<int>();
  std::mt19937_64 rng(20261130);
  int interrupted = 0;
  for (int k = 0; k < kills; ++k) {
    const int done = last_logged_step(run);
    if (done >= steps - 1) break;  // no step left to stop before the end
    const int share = std::max(1, (steps - done) / std::max(1, kills - k));
    const int target = std::min(steps - 1, done + std::uniform_int_distribution<int>(1, share)(rng));
    // A kill that comes late (the test starved of CPU) finds the run stopped at `stop` by itself, not finished: the
    // next kill still has a run to interrupt.
    const std::string stop = std::to_string(std::min(steps - 1, target + share));
    const bool resume = fs::exists(run / "checkpoint.safetensors");
    const std::vector<std::string> args =
        resume ? std::vector<std::string>{"train", "--run", run.string(), "--resume", "--stop-after", stop}
               : std::vector<std::string>{"train",        "--config", config_file.string(), "--run", run.string(),
                                          "--stop-after", stop};
    const bool in_startup = k % 3 == 0 || target <= done;
    const bool once_locked = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
    const pid_t pid = start_cli(args, tmp / "killed.log");
    ASSERT_GT(pid, 0);
    const std::string holder = "pid " + std::to_string(pid) + "\n";
    const auto reached = [&] {
      if (!in_startup) return last_logged_step(run) >= target;
      return !once_locked || slurp(run / ".lock") == holder;
    };
    int status = 0;
    bool exited = false;
    while (!(exited = cli_exited(pid, &status)) && !reached())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (exited) {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(tmp / "killed.log");
      continue;  // it stopped before the kill
    }
    kill_cli(pid);
    ++interrupted;
  }
  const bool resume = fs::exists(run / "checkpoint.safetensors");
  const auto r = resume ? run_cli({"train", "--run", run.string(), "--resume"}, tmp.path())
                        : run_cli({"train", "--config", config_file.string(), "--run", run.string()}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_GE(interrupted, 1) << "every kill came after its run had stopped: nothing was soaked";
  std::cerr << "soak: " << interrupted << " of " << kills << " kills interrupted the run (uninterrupted run " << full_ms
            << " ms)\n";

  expect_identical_records(train_records(straight), train_records(run));
  const auto want = logged_lines(straight), got = logged_lines(run);
  EXPECT_EQ(want.size(), got.size());
  for (std::size_t i = 0; i < std::min(want.size(), got.size()); ++i)
    if (want[i] != got[i]) {
      ADD_FAILURE() << "metrics.jsonl line " << i + 1 << " differs:\n  uninterrupted: " << want[i]
                    << "\n  killed/resumed: " << got[i];
      break;
    }
  if (want.size() != got.size())
    ADD_FAILURE() << "last lines:\n  uninterrupted: " << want.back() << "\n  killed/resumed: " << got.back();
  expect_identical_checkpoints(straight, run);
  const Json a = Json::parse(slurp(straight / "summary.json")), b = Json::parse(slurp(run / "summary.json"));
  EXPECT_EQ(a[normlab::train::field::val_loss], b[normlab::train::field::val_loss]);
  EXPECT_EQ(a["train_loss"], b["train_loss"]);
}

}  // namespace
}  // namespace normlab::train::testing
