// The memory guard (issue 11.5): the estimate is the graph's arena plan plus what lives beside it, it
// matches the measured peak RSS of a real `normlab train` within 15%, an absurd config is refused with
// the estimate before anything large is allocated, --dry-run prints it, and the available memory
// comes from /proc/meminfo lowered to a cgroup's limit.
#include "train/memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <regex>

#include "tiny_corpus.h"
#include "train/run.h"

namespace normlab::train {
namespace {

using testing::describe;
using testing::expect_cli_error;
using testing::run_cli;
using testing::spit;
using testing::TempDir;
using testing::tiny_config;
using testing::tiny_config_doc;
namespace fs = std::filesystem;

struct Measured {
  int exit_code = -1;
  std::string err;
  std::size_t peak_rss = 0;  // bytes: the child's VmHWM, from wait4
};

// Runs `normlab <args>` as a direct child (no shell in between, so the rusage is normlab's own).
Measured run_measured(const std::vector<std::string>& args, const fs::path& scratch) {
  const fs::path err = scratch / "measured.err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::dup2(fd, 1);
    ::setenv("OMP_NUM_THREADS", "2", 1);
    std::vector<char*> argv{const_cast<char*>(NORMLAB_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(NORMLAB_BINARY, argv.data());
    ::_exit(127);
  }
  Measured m;
  int status = 0;
  rusage usage{};
  if (pid < 0 || ::wait4(pid, &status, 0, &usage) != pid) return m;
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  m.err = testing::slurp(err);
  m.peak_rss = static_cast<std::size_t>(usage.ru_maxrss) * 1024;
  return m;
}

// "estimated peak 812.3 MiB" → bytes.
double estimated_peak(const std::string& text) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex(R"(estimated peak ([0-9.]+) (KiB|MiB|GiB))"))) return -1;
  const double unit = match[2] == "KiB" ? 1024.0 : match[2] == "MiB" ? 1024.0 * 1024 : 1024.0 * 1024 * 1024;
  return std::stod(match[1]) * unit;
}

TEST(TrainMemory, EstimateIsTheGraphPlanPlusOptimizerAndProbes) {
  RunConfig c = tiny_config(1);
  c.train.probe_every = 5;
  train::Run run = plan_run(c, 0, {.optimizer = true, .probes = true});
  EXPECT_FALSE(run.model->graph.planned()) << "planning allocates; the estimate must come first";
  const MemoryEstimate& e = run.memory;
  const std::size_t params = run.model->graph.parameter_count();
  EXPECT_EQ(e.parameter_count, params);
  EXPECT_EQ(e.optimizer, 2 * sizeof(float) * params) << "AdamW keeps m and v in the graph's fp32";
  EXPECT_GE(e.weights, params * sizeof(float));
  EXPECT_EQ(e.gradients, e.weights);
  EXPECT_GT(e.activations, 0u);
  EXPECT_GT(e.activation_gradients, 0u);
  EXPECT_GE(e.probes, 8 * params);
  EXPECT_GT(e.resident, 0u) << "VmRSS of this process";
  EXPECT_EQ(e.peak(), e.resident + e.to_allocate());
  // What plan() then allocates is exactly the estimate's arenas (each arena over-allocates 64 bytes to align).
  run.model->graph.plan();
  EXPECT_EQ(run.model->graph.arena_bytes(), e.weights + e.gradients + e.activations + e.activation_gradients + 4 * 64);

  const MemoryEstimate evaluation = plan_run(c, 0, {}).memory;
  EXPECT_EQ(evaluation.optimizer, 0u);
  EXPECT_EQ(evaluation.probes, 0u);
  EXPECT_EQ(evaluation.activations, e.activations);

  // An inference-only run (eval, generate, most probes) keeps no gradients, and plans exactly that.
  train::Run inference = plan_run(c, 0, {.gradients = false});
  EXPECT_EQ(inference.memory.gradients, 0u);
  EXPECT_EQ(inference.memory.activation_gradients, 0u);
  EXPECT_EQ(inference.memory.weights, e.weights);
  EXPECT_EQ(inference.memory.activations, e.activations);
  inference.model->graph.plan();
  EXPECT_EQ(inference.model->graph.arena_bytes(), inference.memory.weights + inference.memory.activations + 4 * 64);
}

// Each extra model (normlab probe's analyses build some beside the run's) is one more copy of the run's arenas.
TEST(TrainMemory, ExtraModelsAreCopiesOfTheRunsModel) {
  const RunConfig c = tiny_config(1);
  const MemoryEstimate base = plan_run(c, 0, {}).memory;
  const MemoryEstimate probe = plan_run(c, 0, {.extra_models = 6}).memory;
  const std::size_t one = base.weights + base.gradients + base.activations + base.activation_gradients + base.workspace;
  EXPECT_EQ(base.extra_models, 0u);
  EXPECT_EQ(probe.extra_models, 6 * one);
  EXPECT_EQ(probe.to_allocate(), base.to_allocate() + 6 * one);
  EXPECT_NE(probe.breakdown().find("analysis models"), std::string::npos) << probe.breakdown();
  // Each extra model keeps its own gradients or none, whatever the run's own model keeps.
  EXPECT_EQ(plan_run(c, 0, {.gradients = false, .extra_models = 6}).memory.extra_models, 6 * one);
  const MemoryEstimate inference = plan_run(c, 0, {.gradients = false}).memory;
  const std::size_t bare = inference.weights + inference.activations + inference.workspace;
  EXPECT_EQ(plan_run(c, 0, {.extra_models = 2, .extra_inference_models = 1}).memory.extra_models, 2 * one + bare);
}

// The estimate against the kernel's count: a real `normlab train` of a few steps whose arenas are a few
// hundred MiB (wide attention: 8 heads over 256 positions, so memory is large and the FLOPs small).
// AddressSanitizer's shadow memory and freed-memory quarantine are resident too, so under it RSS measures the tool.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
constexpr bool kAddressSanitizer = __has_feature(address_sanitizer);
#else
constexpr bool kAddressSanitizer = false;
#endif

TEST(TrainMemory, EstimateIsWithin15PercentOfMeasuredPeakRss) {
  if (kAddressSanitizer) GTEST_SKIP() << "peak RSS under AddressSanitizer includes its shadow memory";
  TempDir tmp("memory");
  Json doc = tiny_config_doc(2);
  doc["model"].update({{"d_model", 64}, {"n_heads", 8}, {"d_ff", 128}, {"max_seq_len", 256}});
  doc["train"].update({{"seq_len", 256}, {"batch_size", 26}, {"eval_batches", 1}});
  spit(tmp / "config.json", doc.dump());
  const Measured m =
      run_measured({"train", "--config", (tmp / "config.json").string(), "--run", (tmp / "run").string()}, tmp.path());
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const double estimate = estimated_peak(m.err);
  ASSERT_GT(estimate, 200.0 * (1 << 20)) << "the model must be big enough for the process overhead not to dominate\n"
                                         << m.err;
  const double measured = static_cast<double>(m.peak_rss);
  std::cout << fmt::format("[memory] estimated peak {:.1f} MiB, measured peak RSS {:.1f} MiB ({:+.1f}%)\n",
                           estimate / (1 << 20), measured / (1 << 20), 100 * (estimate / measured - 1));
  EXPECT_NEAR(estimate / measured, 1.0, 0.15) << m.err;
}

TEST(TrainMemory, AbsurdConfigIsRefusedBeforeAllocating) {
  TempDir tmp("memory");
  spit(tmp / "config.json", tiny_config_doc(3).dump());
  const std::vector<std::string> args = {"train",
                                         "--config",
                                         (tmp / "config.json").string(),
                                         "--run",
                                         (tmp / "run").string(),
                                         "--set",
                                         "model.d_model=65536",
                                         "--set",
                                         "model.n_layers=1024",
                                         "--set",
                                         "model.d_ff=262144",
                                         "--set",
                                         "model.n_heads=64"};
  const Measured m = run_measured(args, tmp.path());
  testing::CliResult r{m.exit_code, "", m.err};
  expect_cli_error(r, {"needs an estimated", "TiB", "is available", "reduce model.d_model", "--dry-run"});
  EXPECT_LT(m.peak_rss, std::size_t{512} << 20) << "refused only after allocating " << m.peak_rss << " bytes";
  EXPECT_FALSE(fs::exists(tmp / "run" / "config.json")) << "a refused run writes nothing";
}

TEST(TrainMemory, DryRunPrintsTheEstimateAndWritesNothing) {
  TempDir tmp("memory");
  spit(tmp / "config.json", tiny_config_doc(3).dump());
  const fs::path run = tmp / "run";
  auto r =
      run_cli({"train", "--dry-run", "--config", (tmp / "config.json").string(), "--run", run.string()}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const RunConfig c = tiny_config(3);
  const std::size_t params = plan_run(c).memory.parameter_count;
  EXPECT_NE(r.out.find(fmt::format("{} parameters", params)), std::string::npos) << describe(r);
  EXPECT_GT(estimated_peak(r.out), 0) << describe(r);
  for (const char* part : {"weights", "gradients", "AdamW moments", "activations", "available:", "fits"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << describe(r);
  EXPECT_FALSE(fs::exists(run)) << "--dry-run writes nothing";

  r = run_cli({"train", "--dry-run", "--config", (tmp / "config.json").string(), "--run", run.string(), "--set",
               "model.d_model=65536", "--set", "model.n_layers=1024", "--set", "model.n_heads=64"},
              tmp.path());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("does NOT fit"), std::string::npos) << describe(r);
}

// Fake /proc and cgroup trees: MemAvailable, then the tightest cgroup room (limit − (usage − inactive
// file cache)) on the way from this process's cgroup up to the root, v2 or v1.
TEST(TrainMemory, AvailableMemoryIsMemAvailableLoweredToCgroupLimits) {
  TempDir tmp("memory");
  const fs::path proc = tmp / "proc", cg = tmp / "cgroup";
  fs::create_directories(proc / "self");
  spit(proc / "meminfo", "MemTotal:       16000000 kB\nMemFree: 100 kB\nMemAvailable:    8000000 kB\n");
  spit(proc / "self" / "cgroup", "0::/jobs/this\n");
  AvailableMemory a = available_memory(proc, cg);  // no cgroup files at all
  EXPECT_EQ(a.bytes, std::size_t{8000000} * 1024);
  EXPECT_NE(a.source.find("MemAvailable"), std::string::npos);

  fs::create_directories(cg / "jobs" / "this");
  spit(cg / "jobs" / "this" / "memory.max", "max\n");  // no limit here ...
  spit(cg / "jobs" / "memory.max", "3000000000\n");    // ... but one above it
  spit(cg / "jobs" / "memory.current", "2500000000\n");
  spit(cg / "jobs" / "memory.stat", "anon 1000\nfile 900000000\ninactive_file 500000000\nactive_file 1\n");
  a = available_memory(proc, cg);
  EXPECT_EQ(a.bytes, std::size_t{1000000000});  // 3e9 − (2.5e9 − 0.5e9 reclaimable)
  EXPECT_NE(a.source.find((cg / "jobs" / "memory.max").string()), std::string::npos) << a.source;

  spit(cg / "memory.max", "100\n");  // the root, tighter still
  EXPECT_EQ(available_memory(proc, cg).bytes, 100u);

  // cgroup v1: the memory controller's hierarchy; "no limit" is a huge number.
  spit(proc / "self" / "cgroup", "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n");
  fs::create_directories(cg / "memory" / "docker" / "abc");
  spit(cg / "memory" / "memory.limit_in_bytes", "9223372036854771712\n");
  spit(cg / "memory" / "docker" / "abc" / "memory.limit_in_bytes", "2000000000\n");
  spit(cg / "memory" / "docker" / "abc" / "memory.usage_in_bytes", "1500000000\n");
  spit(cg / "memory" / "docker" / "abc" / "memory.stat", "cache 1\ntotal_inactive_file 250000000\n");
  EXPECT_EQ(available_memory(proc, cg).bytes, std::size_t{750000000});
}

TEST(TrainMemory, RefusalNamesTheEstimateAndTheAvailableMemory) {
  MemoryEstimate e;
  e.resident = 10 << 20;
  e.weights = e.gradients = 100 << 20;
  e.optimizer = 400 << 20;
  check_memory(e, {std::size_t{1} << 30, "test"});  // 600 MiB fits in 1 GiB
  try {
    check_memory(e, {500 << 20, "MemAvailable in /proc/meminfo"});
    FAIL() << "600 MiB does not fit in 500 MiB";
  } catch (const Error& err) {
    const std::string message = err.what();
    for (const char* part : {"estimated 610.0 MiB", "weights 100.0 MiB", "AdamW moments 400.0 MiB", "600.0 MiB more",
                             "500.0 MiB is available (MemAvailable in /proc/meminfo)"})
      EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  }
  EXPECT_EQ(human_bytes(512), "512 bytes");
  EXPECT_EQ(human_bytes(std::size_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(human_bytes(SIZE_MAX), "more than 16 EiB");
}

}  // namespace
}  // namespace normlab::train
