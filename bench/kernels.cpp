// Benchmark (not a test): the machine's limits and the norm kernels against them.
//   - STREAM triad a = b + s·c (McCalpin's convention: 3 arrays × 4 bytes per element moved, write-allocate not
//     counted), best of the repetitions: the memory bandwidth a streaming kernel can hope for;
//   - fp32 GEMM through engine::gemm (oneDNN), and bf16 beside it on bf16 hardware (train.precision = bf16), at
//     the training shapes of the bench's small model, at 1024³, the LM head and one study-size attention head;
//   - LayerNorm and RMSNorm, the engine's own kernels (op table), forward and backward on rows × d fp32, alone and
//     with the residual add in front: s = a + b, y = Norm(s), as the fused pair (add_layer_norm, add_rms_norm) and
//     as the two ops one after the other.
// A norm is memory-bound: its useful traffic is read x + write y forward and read x, dy + read-modify-write dx
// backward (6 × 4 bytes per element; the saved statistics are rows, not elements), so its speed is reported as
// that traffic over its time, as a fraction of the triad bandwidth measured in the same run. With the add: read a,
// b, write s and y forward; read s, dy and read-modify-write ds, da, db backward (12 × 4 bytes per element).
// Prints a table to stderr ("add+" the fused pair, "add," the two ops) and one JSON line to stdout; bench/kernels.sh
// puts PyTorch's LayerNorm beside it.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/rng.h"
#include "engine/gemm.h"
#include "engine/ops.h"
#include "engine/parallel.h"

namespace {

using namespace normlab;
using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 2, repeats = 20;
  int64_t rows = 8192, d = 1024;
  int64_t triad_elements = int64_t{1} << 25;  // 128 MiB per array: far past every cache
};

// The shortest of `repeats` timings of fn, in seconds.
template <typename Fn>
double best_seconds(int repeats, Fn&& fn) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

// "model name" and the ISA flags that decide the fast paths (AVX-512, bf16, AMX), from /proc/cpuinfo.
nlohmann::json cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown";
  std::vector<std::string> flags;
  while (std::getline(in, line)) {
    if (model == "unknown" && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 2);
    if (flags.empty() && line.rfind("flags", 0) == 0)
      for (const char* f : {"avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16"})
        if ((line + " ").find(std::string(" ") + f + " ") != std::string::npos) flags.emplace_back(f);
  }
  return {{"model", model}, {"isa", flags}};
}

double triad_gb_per_s(const Options& o) {
  const auto n = static_cast<size_t>(o.triad_elements);
  std::vector<float> a(n), b(n), c(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) a[i] = 0, b[i] = 1, c[i] = 2;  // first touch by the threads that stream them
  const float s = 3;
  const double seconds = best_seconds(o.repeats / 2 + 1, [&] {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
  });
  return 3.0 * 4.0 * static_cast<double>(n) / seconds / 1e9;
}

// One GEMM of a linear layer at the given precision (bf16: the operands' conversion is included, as a training step
// pays it). With x [m, k] and W [n, k]: forward y = x·Wᵀ [m, n]; the backward's ∂x = ∂y·W [m, k] and
// ∂W += ∂yᵀ·x [n, k] (accumulated, as the tape does), each named by its own m × n × k.
enum class Pass { forward, input_grad, weight_grad };

double gemm_gflops(const Options& o, int64_t m, int64_t n, int64_t k, engine::GemmPrecision precision, Pass pass) {
  const engine::ScopedGemmPrecision scope(precision);
  std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f),
      c(static_cast<size_t>(m * n));
  const double seconds = best_seconds(o.repeats / 4 + 1, [&] {
    switch (pass) {  // the same m × n × k product, its operands stored as the tape stores them
      case Pass::forward:
        engine::gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
        break;
      case Pass::input_grad:
        engine::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
        break;
      case Pass::weight_grad:
        engine::gemm(true, false, m, n, k, 1.0f, a.data(), m, b.data(), n, 1.0f, c.data(), n);
        break;
    }
  });
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / seconds / 1e9;
}

struct NormTiming {
  double forward_s, backward_s;
};

enum class Residual { none, fused, unfused };

// The engine's kernels for one norm node, called straight from the op table (no tape, no loss); with a residual
// add in front, the pair's fused kernel or the add's and the norm's one after the other.
NormTiming time_norm(const Options& o, bool rms, Residual residual) {
  engine::Graph g;
  const engine::Shape shape{o.rows, o.d};
  const engine::TensorId a = g.activation("a", shape, true);
  const engine::TensorId x = residual == Residual::none ? a : engine::add(g, "x", a, g.activation("b", shape, true));
  const engine::TensorId gain = g.parameter("gain", engine::Shape{o.d}, engine::Role::norm_gain, false, 1.0);
  const engine::TensorId y =
      rms ? engine::rms_norm(g, "y", x, gain, 1e-6)
          : engine::layer_norm(g, "y", x, gain, g.parameter("bias", engine::Shape{o.d}, engine::Role::norm_bias, false),
                               1e-5);
  g.set_fusion(residual == Residual::fused);
  g.plan();
  Rng rng(7);
  float *dy = g.grad<float>(y), *gs = g.data<float>(gain);
  for (engine::TensorId input : {a, g.find("b")})
    if (input != engine::kNoTensor)
      for (int64_t i = 0; i < shape.numel(); ++i) g.data<float>(input)[i] = static_cast<float>(rng.normal());
  for (int64_t i = 0; i < shape.numel(); ++i) dy[i] = static_cast<float>(rng.normal());
  std::fill(gs, gs + o.d, 1.0f);
  // The node list each pass runs: the fused pair's first node with the fused kernel, or each node with its own.
  std::vector<std::pair<const engine::Node*, engine::OpKind>> steps;
  for (const engine::Node& node : g.nodes()) {
    if (node.fused_with_next) {
      steps.emplace_back(&node, node.fused_op);
      break;
    }
    steps.emplace_back(&node, node.op);
  }
  auto forward = [&] {
    for (auto [node, kind] : steps) engine::op_def(kind).kernels.forward(g, *node);
  };
  auto backward = [&] {
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) engine::op_def(it->second).kernels.backward(g, *it->first);
  };
  forward();  // warm: page faults and first touch are not the kernel's
  backward();
  return {best_seconds(o.repeats, forward), best_seconds(o.repeats, backward)};
}

int run(const Options& o) {
  engine::set_threads(o.threads);
  const double triad = triad_gb_per_s(o);
  nlohmann::json gemms = nlohmann::json::array();
  // The small model's linear layers at B·T = 2048 rows (bench/README.md), a square one, the small model's LM head
  // and one attention head of the study-size model; bf16 beside fp32 where the CPU has bf16 hardware.
  const bool bf16 = engine::cpu_has_bf16();
  // The small model's fc1 forward and its two backward GEMMs (∂x = ∂y·W: 2048 × 256 × 1024, ∂W += ∂yᵀ·x:
  // 1024 × 256 × 2048), fc2's forward, a square one, the LM head, one attention head of the study-size model.
  const std::array<std::tuple<int64_t, int64_t, int64_t, Pass>, 8> shapes{{{2048, 1024, 256, Pass::forward},
                                                                           {2048, 256, 1024, Pass::input_grad},
                                                                           {1024, 256, 2048, Pass::weight_grad},
                                                                           {2048, 256, 1024, Pass::forward},
                                                                           {2048, 768, 256, Pass::forward},
                                                                           {1024, 1024, 1024, Pass::forward},
                                                                           {2048, 8192, 256, Pass::forward},
                                                                           {64, 64, 16, Pass::forward}}};
  for (auto [m, n, k, pass] : shapes) {
    const char* name = pass == Pass::forward ? "x·Wᵀ" : pass == Pass::input_grad ? "∂y·W" : "∂W += ∂yᵀ·x";
    nlohmann::json g{{"m", m},
                     {"n", n},
                     {"k", k},
                     {"pass", name},
                     {"gflops", gemm_gflops(o, m, n, k, engine::GemmPrecision::fp32, pass)}};
    if (bf16) g["bf16_gflops"] = gemm_gflops(o, m, n, k, engine::GemmPrecision::bf16, pass);
    gemms.push_back(g);
  }
  nlohmann::json norms = nlohmann::json::array();
  for (Residual residual : {Residual::none, Residual::fused, Residual::unfused})
    for (bool rms : {false, true}) {
      const NormTiming t = time_norm(o, rms, residual);
      const double bytes_per_element = residual == Residual::none ? 6 * 4 : 12 * 4;
      const double gbs = bytes_per_element * static_cast<double>(o.rows * o.d) / (t.forward_s + t.backward_s) / 1e9;
      const char* prefix = residual == Residual::none ? "" : residual == Residual::fused ? "add+" : "add,";
      norms.push_back({{"norm", fmt::format("{}{}", prefix, rms ? "rmsnorm" : "layernorm")},
                       {"forward_ms", 1e3 * t.forward_s},
                       {"backward_ms", 1e3 * t.backward_s},
                       {"gb_per_s", gbs},
                       {"fraction_of_triad", gbs / triad}});
    }
  const nlohmann::json line{{"impl", "normlab"}, {"cpu", cpu_description()}, {"threads", o.threads}, {"rows", o.rows},
                            {"d", o.d},          {"triad_gb_per_s", triad},  {"gemm", gemms},        {"norms", norms}};
  std::fprintf(stderr, "%s, %d threads (%s)\n", line["cpu"]["model"].get<std::string>().c_str(), o.threads,
               line["cpu"]["isa"].dump().c_str());
  std::fprintf(stderr, "STREAM triad: %.1f GB/s\n", triad);
  for (const auto& gm : gemms)
    std::fprintf(stderr, "gemm %ld x %ld x %ld (%s): fp32 %.1f GFLOP/s, bf16 %s\n", gm["m"].get<long>(),
                 gm["n"].get<long>(), gm["k"].get<long>(), gm["pass"].get<std::string>().c_str(),
                 gm["gflops"].get<double>(),
                 gm.contains("bf16_gflops") ? fmt::format("{:.1f} GFLOP/s", gm["bf16_gflops"].get<double>()).c_str()
                                            : "(no bf16 hardware)");
  for (const auto& nm : norms)
    std::fprintf(stderr, "%-13s %ld x %ld: forward %.2f ms, backward %.2f ms, %.1f GB/s = %.2f of triad\n",
                 nm["norm"].get<std::string>().c_str(), static_cast<long>(o.rows), static_cast<long>(o.d),
                 nm["forward_ms"].get<double>(), nm["backward_ms"].get<double>(), nm["gb_per_s"].get<double>(),
                 nm["fraction_of_triad"].get<double>());
  fmt::print("{}\n", line.dump());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"normlab_bench_kernels: memory bandwidth, GEMM GFLOP/s and the norm kernels against them"};
  app.add_option("--threads", o.threads, "OpenMP threads")->check(CLI::Range(1, 1024));
  app.add_option("--repeats", o.repeats, "timings per kernel (the best is kept)")->check(CLI::Range(1, 10000));
  app.add_option("--rows", o.rows, "rows of the norm input")->check(CLI::Range(1, 1 << 24));
  app.add_option("--d", o.d, "width of the norm input")->check(CLI::Range(2, 1 << 20));
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "normlab_bench_kernels: %s\n", e.what());
    return 1;
  }
}
