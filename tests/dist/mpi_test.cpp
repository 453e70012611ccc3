// normlab under mpirun (docs/scaling.md): a data-parallel run follows the single-process run step for step,
// a killed rank ends the job and leaves a checkpoint that resumes (with another process count), and a study
// spread over ranks gives the single-process study's verdict and numbers. Needs a build with MPI and
// OpenMPI's mpirun (scripts/setup.sh installs both); a build without MPI skips them, and says so.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include "dist/comm.h"
#include "train/records.h"
#include "train/tiny_corpus.h"

namespace normlab::train::testing {
namespace {

// `mpirun -np <ranks> normlab <args>` on this machine: as root OpenMPI needs its two confirmations, two
// ranks may share the two cores (--oversubscribe, no binding), and each rank gets one OpenMP thread.
std::vector<std::string> mpirun_args(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> out = {"mpirun", "-np", std::to_string(ranks), "--oversubscribe", "--bind-to",
                                  "none",   "-x",  "OMP_NUM_THREADS=1",   NORMLAB_BINARY};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

const char* const kMpiEnv = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";

CliResult run_mpi(int ranks, const std::vector<std::string>& args, const fs::path& scratch,
                  const std::string& env = "") {
  std::string command = env + kMpiEnv;
  for (const std::string& a : mpirun_args(ranks, args)) command.append(shell_quote(a)).append(" ");
  return run_captured(command, scratch);
}

#define REQUIRE_MPI()                                                                                       \
  do {                                                                                                      \
    if (!dist::built_with_mpi()) GTEST_SKIP() << "built without MPI (NORMLAB_MPI=OFF or no OpenMPI)";       \
    ASSERT_EQ(std::system("command -v mpirun >/dev/null"), 0) << "mpirun is missing: run scripts/setup.sh"; \
  } while (0)

// The relative difference, with an absolute floor for values near zero.
double relative(double a, double b) { return std::abs(a - b) / std::max(1e-3, std::abs(b)); }

// The stated tolerance of data-parallel against single-process training (docs/scaling.md): the ranks sum
// their fp32 gradients in another order than one process's GEMMs do, so the runs differ by rounding.
constexpr double kTolerance = 2e-5;

// A decoder, and an encoder, whose loss is a mean over the masked positions: each rank weighs its loss by its share
// of the batch's masked positions, so the sum is still the batch's mean.
TEST(DataParallel, TwoRanksFollowTheSingleProcessRunStepForStep) {
  REQUIRE_MPI();
  for (const char* shape : {"decoder", "encoder"}) {
    SCOPED_TRACE(shape);
    TempDir tmp("mpi");
    // An uneven split (5 rows: 3 + 2), accumulation and dropout: every weighting and every mask must
    // come out as in one process.
    Json config = tiny_config_doc(16);
    config["model"]["shape"] = shape;
    config["train"]["batch_size"] = 5;
    config["train"]["grad_accum"] = 2;
    config["train"]["eval_every"] = 8;
    config["train"]["checkpoint_every"] = 8;
    config["model"]["dropout"] = 0.1;
    spit(tmp / "config.json", config.dump());

    const CliResult one =
        run_cli({"train", "--config", (tmp / "config.json").string(), "--run", (tmp / "one").string()}, tmp.path());
    ASSERT_EQ(one.exit_code, 0) << describe(one);
    const CliResult two =
        run_mpi(2, {"train", "--config", (tmp / "config.json").string(), "--run", (tmp / "two").string()}, tmp.path());
    ASSERT_EQ(two.exit_code, 0) << describe(two);
    EXPECT_NE(two.err.find("data-parallel over 2 processes (3 of 5 rows each on rank 0)"), std::string::npos)
        << describe(two);

    const auto a = train_records(tmp / "one"), b = train_records(tmp / "two");
    ASSERT_EQ(a.size(), 16u);
    ASSERT_EQ(b.size(), a.size()) << "rank 0 alone writes metrics.jsonl, one record per step";
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].step, b[i].step);
      EXPECT_LT(relative(b[i].loss, a[i].loss), kTolerance) << "step " << a[i].step;
      EXPECT_LT(relative(b[i].grad_norm, a[i].grad_norm), kTolerance) << "step " << a[i].step;
      worst = std::max({worst, relative(b[i].loss, a[i].loss), relative(b[i].grad_norm, a[i].grad_norm)});
    }
    // Not trivially equal: the losses moved, and a different split is not the same computation.
    EXPECT_GT(std::abs(a.front().loss - a.back().loss), 0.05);
    std::cerr << shape << ": largest relative difference over 16 steps (loss, grad norm): " << worst << "\n";
    std::vector<double> eval_a, eval_b;
    for (auto [dir, out] : {std::pair{"one", &eval_a}, {"two", &eval_b}})
      for (const auto& j : read_metrics(tmp / dir))
        if (j.at("type") == "eval")
          out->insert(out->end(),
                      {j.at(normlab::train::field::val_loss).get<double>(), j.at("val_accuracy").get<double>()});
    ASSERT_EQ(eval_a.size(), 4u);
    ASSERT_EQ(eval_b.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_LT(relative(eval_b[i], eval_a[i]), kTolerance);
  }
}

// The gradient sum overlaps the backward pass (dist::OverlappedSum): each bucket of the gradient block is summed as
// soon as the tape declares it final (by default across hosts; NORMLAB_ALLREDUCE_OVERLAP=1 here). A decoder whose
// 0.8 M gradients span four 256 Ki-element buckets trains, over two ranks, bit for bit as with the sum after the
// whole pass (NORMLAB_ALLREDUCE_OVERLAP=0): no bucket was summed before its last write. (Against one process it
// differs by rounding, as every data-parallel run does.)
TEST(DataParallel, OverlappedGradientSumEqualsTheSumAfterTheBackwardPass) {
  REQUIRE_MPI();
  TempDir tmp("mpi_overlap");
  Json config = tiny_config_doc(6);
  config["model"].merge_patch(Json{{"d_model", 128}, {"n_heads", 4}, {"d_ff", 512}, {"n_layers", 4}});
  config["train"]["batch_size"] = 4;
  spit(tmp / "config.json", config.dump());
  const auto train = [&](const std::string& run, const std::string& env) {
    const CliResult r = run_mpi(2, {"train", "--config", (tmp / "config.json").string(), "--run", (tmp / run).string()},
                                tmp.path(), env);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return train_records(tmp / run);
  };
  const auto overlapped = train("overlapped", "NORMLAB_ALLREDUCE_OVERLAP=1 "),
             after = train("after", "NORMLAB_ALLREDUCE_OVERLAP=0 ");
  ASSERT_EQ(overlapped.size(), 6u);
  ASSERT_EQ(after.size(), overlapped.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(overlapped[i].loss, after[i].loss) << "step " << after[i].step;
    EXPECT_EQ(overlapped[i].grad_norm, after[i].grad_norm) << "step " << after[i].step;
  }
  EXPECT_GT(std::abs(after.front().loss - after.back().loss), 1e-3);
}

TEST(DataParallel, TooFewRowsForTheRanksIsRefusedByName) {
  REQUIRE_MPI();
  TempDir tmp("mpi");
  Json config = tiny_config_doc(4);
  config["train"]["batch_size"] = 1;
  spit(tmp / "config.json", config.dump());
  const CliResult r =
      run_mpi(2, {"train", "--config", (tmp / "config.json").string(), "--run", (tmp / "r").string()}, tmp.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("train.batch_size = 1 cannot be split over 2 processes"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("rank 0 of 2"), std::string::npos) << describe(r);
  EXPECT_FALSE(fs::exists(tmp / "r" / "metrics.jsonl"));
}

// The pid of the rank `rank` among mpirun's children (OpenMPI starts the local ranks as its children).
pid_t rank_pid(pid_t mpirun, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = slurp(entry.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string state;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent != mpirun) continue;
    std::string environ = slurp(entry.path() / "environ");
    for (char& c : environ)
      if (c == '\0') c = '\n';
    if (("\n" + environ).find("\n" + want + "\n") != std::string::npos) return std::stoi(name);
  }
  return 0;
}

TEST(DataParallel, AKilledRankEndsTheJobNamingItAndTheCheckpointResumesWithOneProcess) {
  REQUIRE_MPI();
  TempDir tmp("mpi");
  Json config = tiny_config_doc(1000000);  // never ends on its own
  config["train"]["checkpoint_every"] = 5;
  config["train"]["log_every"] = 5;
  spit(tmp / "config.json", config.dump());
  const fs::path run = tmp / "run", log = tmp / "mpirun.log";
  const pid_t mpirun = fork();
  if (mpirun == 0) {
    for (const char* v : {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"}) setenv(v, "1", 1);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1), dup2(fd, 2);
    auto args = mpirun_args(2, {"train", "--config", (tmp / "config.json").string(), "--run", run.string()});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("mpirun", argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(run / "checkpoint.json") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(fs::exists(run / "checkpoint.json")) << slurp(log);
  const pid_t victim = rank_pid(mpirun, 1);
  ASSERT_GT(victim, 0) << "no rank 1 among mpirun's children";
  kill(victim, SIGKILL);
  int status = 0;
  waitpid(mpirun, &status, 0);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(log);
  EXPECT_NE(slurp(log).find("rank 1"), std::string::npos) << "the job's end names the dead rank:\n" << slurp(log);

  const int saved = Json::parse(slurp(run / "checkpoint.json")).at("step").get<int>();
  ASSERT_GE(saved, 5);
  const CliResult resumed =
      run_cli({"train", "--run", run.string(), "--resume", "--stop-after", std::to_string(saved + 5)}, tmp.path());
  ASSERT_EQ(resumed.exit_code, 0) << describe(resumed);
  EXPECT_NE(resumed.err.find("resumed " + run.string() + " at step " + std::to_string(saved)), std::string::npos)
      << describe(resumed);
  EXPECT_EQ(train_records(run).back().step, saved + 5);
}

// A quick study on the tiny corpus, with more options.
std::vector<std::string> quick_study(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"study", "depth-variance", "--quick", "--set",
                                   "data.dir=" + tiny_data_dir().string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// A study's verdict line.
std::string verdict(const std::string& out) { return out.substr(0, out.find('\n')); }

// summary.csv's cells by row, without the seconds column.
std::vector<std::vector<std::string>> summary_cells(const fs::path& csv) {
  std::istringstream in(slurp(csv));
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    if (cells.size() > 3) cells.erase(cells.begin() + 3);
    rows.push_back(std::move(cells));
  }
  return rows;
}

TEST(DistributedStudy, AQuickStudyOverTwoRanksGivesTheSingleProcessVerdictAndNumbers) {
  REQUIRE_MPI();
  TempDir tmp("mpi");
  // One thread per run on both sides: the kernels' sums are split by thread, so bits are compared at equal threads.
  const CliResult one = run_cli(quick_study({"--out", (tmp / "one").string(), "--threads", "1"}), tmp.path());
  ASSERT_EQ(one.exit_code, 0) << describe(one);
  const CliResult two = run_mpi(2, quick_study({"--out", (tmp / "two").string(), "--threads", "1"}), tmp.path());
  ASSERT_EQ(two.exit_code, 0) << describe(two);
  EXPECT_NE(two.err.find("on rank 1"), std::string::npos) << "rank 1 ran none of the runs:\n" << describe(two);
  EXPECT_EQ(verdict(two.out), verdict(one.out));
  // Every run's losses are the same numbers.
  EXPECT_EQ(summary_cells(tmp / "two" / "summary.csv"), summary_cells(tmp / "one" / "summary.csv"));
  EXPECT_NE(slurp(tmp / "two" / "report.md").find("on each of 2 MPI ranks"), std::string::npos);
}

// --ranks-per-run 2: each run trains data-parallel under its own mpirun, over a group of the job's ranks or, without
// mpirun, as two processes on this host; the study's verdict and numbers are the single-process ones to the stated
// tolerance of data-parallel training.
TEST(DistributedStudy, RunsOverGroupsOfRanksTrainDataParallelAndKeepTheVerdict) {
  REQUIRE_MPI();
  TempDir tmp("mpi");
  const CliResult one = run_cli(quick_study({"--out", (tmp / "one").string()}), tmp.path());
  ASSERT_EQ(one.exit_code, 0) << describe(one);
  const std::vector<std::string> root = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  const CliResult group = run_mpi(
      2, quick_study({"--out", (tmp / "group").string(), "--threads", "1", "--ranks-per-run", "2"}), tmp.path());
  ASSERT_EQ(group.exit_code, 0) << describe(group);
  EXPECT_NE(group.err.find("on ranks 0-1"), std::string::npos) << describe(group);
  const CliResult host =
      run_cli(quick_study({"--out", (tmp / "host").string(), "--ranks-per-run", "2"}), tmp.path(), root);
  ASSERT_EQ(host.exit_code, 0) << describe(host);
  const auto expected = summary_cells(tmp / "one" / "summary.csv");
  for (const char* name : {"group", "host"}) {
    SCOPED_TRACE(name);
    for (const auto& entry : fs::directory_iterator(tmp / name / "runs"))
      EXPECT_NE(slurp(entry.path() / "log.txt").find("data-parallel over 2 processes"), std::string::npos)
          << entry.path() << " did not train on 2 processes";
    EXPECT_EQ(verdict((std::string(name) == "group" ? group : host).out), verdict(one.out));
    const auto got = summary_cells(tmp / name / "summary.csv");
    ASSERT_EQ(got.size(), expected.size());
    for (size_t row = 1; row < got.size(); ++row)  // id, kind, status as they are; the losses to the tolerance
      for (size_t cell = 0; cell < 5; ++cell) {
        if (cell < 3) {
          EXPECT_EQ(got[row][cell], expected[row][cell]);
        } else {
          EXPECT_LT(relative(std::stod(got[row][cell]), std::stod(expected[row][cell])), kTolerance) << got[row][0];
        }
      }
  }
  EXPECT_NE(slurp(tmp / "group" / "report.md").find("each run data-parallel over 2 processes"), std::string::npos);
  const CliResult odd = run_mpi(2, quick_study({"--out", (tmp / "odd").string(), "--ranks-per-run", "3"}), tmp.path());
  EXPECT_NE(odd.exit_code, 0);
  EXPECT_NE(odd.err.find("--ranks-per-run 3 cannot split the job's 2 ranks into groups of 3"), std::string::npos)
      << describe(odd);
}

TEST(Processes, CommandsThatDoNotUseTheRanksRefuseMpirun) {
  REQUIRE_MPI();
  TempDir tmp("mpi");
  const CliResult r = run_mpi(2, {"variants"}, tmp.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("normlab variants runs in one process: start it without mpirun"), std::string::npos)
      << describe(r);
}

TEST(Processes, HelpSaysWhetherTheBuildHasMpi) {
  TempDir tmp("mpi");
  const CliResult r = run_cli({"--help"}, tmp.path());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find(dist::built_with_mpi() ? "built with MPI (Open MPI" : "built without MPI: single process only"),
            std::string::npos)
      << describe(r);
}

}  // namespace
}  // namespace normlab::train::testing
