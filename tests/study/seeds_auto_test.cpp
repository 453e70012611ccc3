// --seeds auto end to end, with real runs: a study whose synthetic sub-claim stays unclear adds seeds two at a
// time up to the cap (3, 5, 7, 8), one whose sub-claim is decided stops at 3, and a study killed in the middle of
// an added seed's run resumes it from its checkpoint and ends with the uninterrupted study's numbers.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "study/kit.h"
#include "train/tiny_corpus.h"

namespace normlab::study {
namespace {

namespace fs = std::filesystem;
using train::testing::slurp;
using train::testing::TempDir;

constexpr int kSteps = 400;  // long enough that a kill after the first checkpoint (step 100) lands mid-run

std::vector<RunRequest> tiny_plan(const StudyOptions& o) {
  std::vector<RunRequest> runs;
  for (int seed : o.seeds) {
    Json config = train::testing::tiny_config_doc(kSteps);
    config["train"]["seed"] = seed;
    config["train"]["log_every"] = 50;
    runs.push_back({seed_id("tiny", seed), config, "train", ""});
  }
  return runs;
}

// The sub-claim "x > 0" on a number that is +1 on odd seeds and −1 on even ones (unclear at every look), or 1 +
// seed/100 (decided at once), and NaN for a seed whose run did not finish with a loss.
template <bool kUnclear>
Report tiny_judge(const StudyOptions& o, const std::vector<RunOutcome>& runs) {
  Report r;
  r.claims.push_back(claim_above("A", "synthetic", "±1 by seed parity, or 1 + seed/100",
                                 over_seeds(o.seeds,
                                            [&](int seed) {
                                              const double loss =
                                                  train_result(find_run(runs, seed_id("tiny", seed))).final_loss;
                                              const double v = kUnclear ? (seed % 2 ? 1.0 : -1.0) : 1 + seed / 100.0;
                                              return std::isnan(loss) ? NAN : v;
                                            }),
                                 0.0));
  return r;
}

const Study kUnclear{.name = "seeds-auto-unclear",
                     .title = "t",
                     .claim = "c",
                     .source = "s",
                     .cost = "",
                     .plan = tiny_plan,
                     .judge = tiny_judge<true>};
const Study kDecided{.name = "seeds-auto-decided",
                     .title = "t",
                     .claim = "c",
                     .source = "s",
                     .cost = "",
                     .plan = tiny_plan,
                     .judge = tiny_judge<false>};

StudyOptions auto_options(const fs::path& dir) {
  StudyOptions o{.dir = dir};
  choose_seeds(o, "auto", 8);
  return o;
}

RunnerOptions runner() { return {.jobs = 2, .threads = 2, .quiet = true, .binary = NORMLAB_BINARY}; }

// Each line of a run's metrics.jsonl without the fields that time it.
std::string metrics_without_times(const fs::path& run_dir) {
  std::istringstream in(slurp(run_dir / "run" / "metrics.jsonl"));
  std::string out;
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line);
    j.erase("tokens_per_s"), j.erase("elapsed_s");
    out += j.dump() + "\n";
  }
  return out;
}

std::vector<size_t> look_sizes(const fs::path& dir) {
  std::vector<size_t> sizes;
  const Json report = Json::parse(slurp(dir / "report.json"));
  for (const Json& look : report["looks"]) sizes.push_back(look["seeds"].size());
  return sizes;
}

TEST(SeedsAuto, AddsSeedsWhileUnclearStopsAtTheCapAndResumesAfterAKill) {
  TempDir tmp("seeds-auto");
  const fs::path straight = tmp / "straight";
  const StudyResult full = run_study(kUnclear, auto_options(straight), runner());
  EXPECT_EQ(full.verdict, "inconclusive");
  EXPECT_EQ(look_sizes(straight), (std::vector<size_t>{3, 5, 7, 8}));
  ASSERT_EQ(full.claims.size(), 1u);
  EXPECT_EQ(full.claims[0].values.seeds, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_DOUBLE_EQ(full.claims[0].confidence, 0.9875);  // Bonferroni over the 4 planned looks
  EXPECT_FALSE(fs::exists(straight / "runs" / "tiny-s9"));

  // The same study in a child process group, killed (SIGKILL, the whole group: the study and its runs) once seed
  // 4's run, the first of the first added look, has checkpointed and not yet ended.
  const fs::path killed = tmp / "killed";
  const fs::path s4 = killed / "runs" / "tiny-s4";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    try {
      run_study(kUnclear, auto_options(killed), runner());
    } catch (...) {
      _exit(2);
    }
    _exit(0);
  }
  setpgid(pid, pid);
  bool interrupted = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < give_up) {
    if (fs::exists(s4 / "run" / train::kCheckpointFile) && !fs::exists(s4 / "status.json")) {
      interrupted = kill(-pid, SIGKILL) == 0;
      break;
    }
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(interrupted) << "seed 4's run ended before the kill could land mid-run";
  ASSERT_FALSE(fs::exists(s4 / "status.json"));

  const StudyResult resumed = run_study(kUnclear, auto_options(killed), runner());
  EXPECT_EQ(resumed.verdict, "inconclusive");
  EXPECT_EQ(look_sizes(killed), (std::vector<size_t>{3, 5, 7, 8}));
  EXPECT_EQ(slurp(killed / "seeds.csv"), slurp(straight / "seeds.csv"));
  for (int seed = 1; seed <= 8; ++seed) {
    const std::string id = seed_id("tiny", seed);
    EXPECT_EQ(slurp(killed / "runs" / id / "run" / train::kCheckpointFile),
              slurp(straight / "runs" / id / "run" / train::kCheckpointFile))
        << id;
    EXPECT_EQ(metrics_without_times(killed / "runs" / id), metrics_without_times(straight / "runs" / id)) << id;
  }
}

TEST(SeedsAuto, StopsAtTheFirstLookWhenEverySubClaimIsDecided) {
  TempDir tmp("seeds-auto");
  const StudyResult r = run_study(kDecided, auto_options(tmp / "decided"), runner());
  EXPECT_EQ(r.verdict, "reproduced");
  EXPECT_EQ(look_sizes(tmp / "decided"), (std::vector<size_t>{3}));
  EXPECT_FALSE(fs::exists(tmp / "decided" / "runs" / "tiny-s4"));
  const Json report = Json::parse(slurp(tmp / "decided" / "report.json"));
  EXPECT_EQ(report["auto_seeds"], true);
  EXPECT_EQ(report["max_seeds"], 8);
  EXPECT_EQ(report["planned_looks"], 4);
}

}  // namespace
}  // namespace normlab::study
