// Benchmark (not a test): times full training steps of a GPT-style Pre-LN model in normlab.
// One step = zero grads, forward, backward, global grad norm, clip factor, AdamW update: exactly
// the work train::Trainer does per step (without data loading, logging or checkpoints).
// Prints one JSON line; bench/torch_train.py prints the same line for the PyTorch peer and
// bench/run.sh alternates the two.
#include <omp.h>
#include <sys/resource.h>

#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/gemm.h"
#include "engine/ops.h"
#include "engine/parallel.h"
#include "model/config.h"
#include "model/init.h"
#include "model/transformer.h"
#include "train/adamw.h"
#include "train/trainer.h"

namespace {

using namespace normlab;
using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 2, steps = 6, warmup = 2;
  int vocab = 8192, d_model = 256, n_layers = 8, n_heads = 4, d_ff = 0, seq = 256, batch = 8;
  uint64_t seed = 1234;
  std::string placement = "pre";  // with the placement's own defaults (pre_rms: RMSNorm; pre_crms: CRMSNorm, untied)
  bool marks = false;             // print CLOCK_MONOTONIC phase times to stderr (for `perf record -k CLOCK_MONOTONIC`)
  bool profile = false;           // time op kinds and phases over the timed steps (train/profile.h)
  bool fuse = true;               // engine.fuse: residual add + norm pairs as one kernel
  bool recompute_attention = false;  // engine.recompute_attention: no saved [B, H, T, T] probabilities
  bool bf16 = false;                 // train.precision = bf16: GEMMs on bf16 operands, fp32 sums (engine/gemm.h)
};

// Seconds on CLOCK_MONOTONIC (steady_clock on Linux), the clock `perf record -k CLOCK_MONOTONIC` stamps.
double monotonic_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// CPU time of the whole process (all threads, user + system), in milliseconds.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

int run(const Options& o) {
  engine::set_threads(o.threads);

  // The placement's defaults (its norm type, tying) fill what is not set here; "pre" gives Pre-LN with LayerNorm
  // (ε 1e-5, bias), tied embeddings and N(0, 0.02) weights.
  const model::ModelConfig cfg =
      model::read_model_config(Json{{"vocab_size", o.vocab},
                                    {"d_model", o.d_model},
                                    {"n_layers", o.n_layers},
                                    {"n_heads", o.n_heads},
                                    {"d_ff", o.d_ff > 0 ? o.d_ff : 4 * o.d_model},
                                    {"max_seq_len", o.seq},
                                    {"placement", o.placement},
                                    {"activation", "gelu"},
                                    {"positions", "learned"},
                                    {"bias", true},
                                    {"dropout", 0.0},
                                    {"init", {{"scheme", "gpt2"}, {"std", 0.02}, {"embed_std", 0.02}}}},
                               "bench");

  auto m = model::build_unplanned_model(cfg, o.batch, o.seq);
  m->graph.set_fusion(o.fuse);
  if (o.recompute_attention) engine::recompute_attention_probabilities(m->graph);
  if (o.bf16 && !engine::cpu_has_bf16()) throw std::runtime_error("--bf16: this CPU has neither avx512_bf16 nor AMX");
  const engine::ScopedGemmPrecision precision(o.bf16 ? engine::GemmPrecision::bf16 : engine::GemmPrecision::fp32);
  m->graph.plan();
  model::initialize(*m, o.seed);
  train::AdamW opt(m->graph);
  const train::AdamWSettings adamw{3e-4, 0.9, 0.95, 1e-8, 0.1};

  // Random tokens from a fixed stream; targets are the next token, as in language modelling.
  const size_t n = static_cast<size_t>(o.batch) * static_cast<size_t>(o.seq);
  std::vector<int32_t> stream(n + 1), tokens(n), targets(n);
  Rng rng(o.seed ^ 0x5eedULL);
  for (auto& t : stream) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(o.vocab));
  for (size_t i = 0; i < n; ++i) tokens[i] = stream[i], targets[i] = stream[i + 1];
  m->set_batch(tokens.data(), targets.data());

  std::vector<double> ms, cpu_ms, losses;
  train::TrainProfile profile_data;
  train::TrainProfile* const profile = o.profile ? &profile_data : nullptr;
  if (profile) profile->first_step = o.warmup + 1, profile->last_step = o.warmup + o.steps;
  if (o.marks) std::fprintf(stderr, "mark setup_done %.6f\n", monotonic_s());
  for (int step = 1; step <= o.warmup + o.steps; ++step) {
    if (o.marks && step == o.warmup + 1) std::fprintf(stderr, "mark timed_begin %.6f\n", monotonic_s());
    if (profile && step == o.warmup + 1) m->graph.set_profile(&profile->ops);
    const auto t0 = Clock::now();
    const double c0 = process_cpu_ms();
    m->graph.set_step(static_cast<uint64_t>(step));
    m->graph.zero_param_grads();
    const double loss = m->forward(true);
    m->graph.backward(m->loss);
    double gn = 0;
    {
      train::PhaseTimer timer(step > o.warmup ? profile : nullptr, &train::TrainProfile::grad_norm_s);
      gn = train::global_grad_norm(m->graph);
    }
    {
      train::PhaseTimer timer(step > o.warmup ? profile : nullptr, &train::TrainProfile::optimizer_s);
      opt.step(adamw, gn > 1.0 ? 1.0 / gn : 1.0, step);
    }
    const double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const double cpu = process_cpu_ms() - c0;
    if (step > o.warmup) ms.push_back(elapsed), cpu_ms.push_back(cpu), losses.push_back(loss);
    if (profile && step > o.warmup) profile->loop_s += elapsed / 1e3;
  }
  if (o.marks) std::fprintf(stderr, "mark timed_end %.6f\n", monotonic_s());

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss: the process's peak resident set, in KiB on Linux
  nlohmann::json line{{"impl", "normlab"},
                      {"threads", o.threads},
                      {"peak_rss_mib", static_cast<double>(usage.ru_maxrss) / 1024.0},
                      {"omp_max_threads", omp_get_max_threads()},
                      {"ms_per_step", ms},
                      {"cpu_ms_per_step", cpu_ms},
                      {"tokens_per_step", n},
                      {"warmup", o.warmup},
                      {"loss", losses},
                      {"model",
                       {{"vocab", o.vocab},
                        {"d_model", o.d_model},
                        {"n_layers", o.n_layers},
                        {"n_heads", o.n_heads},
                        {"d_ff", cfg.d_ff},
                        {"seq", o.seq},
                        {"batch", o.batch},
                        {"placement", std::string(cfg.placement.name())},
                        {"norm", cfg.norm.type},
                        {"fused_pairs", m->graph.fused_pairs()},
                        {"recompute_attention", o.recompute_attention},
                        {"precision", o.bf16 ? "bf16" : "fp32"}}}};
  if (profile) {
    line["profile"] = profile->to_json();
    std::fprintf(stderr, "%s", profile->table().c_str());
  }
  fmt::print("{}\n", line.dump());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"normlab_bench_train: times training steps of a GPT-style Pre-LN model (fp32, AdamW)"};
  app.add_option("--threads", o.threads, "OpenMP threads")->check(CLI::Range(1, 1024));
  app.add_option("--steps", o.steps, "timed steps")->check(CLI::Range(1, 1 << 20));
  app.add_option("--warmup", o.warmup, "untimed warm-up steps")->check(CLI::Range(0, 1 << 20));
  app.add_option("--vocab", o.vocab, "vocabulary size")->check(CLI::Range(2, 1 << 24));
  app.add_option("--d-model", o.d_model, "model width")->check(CLI::Range(1, 1 << 16));
  app.add_option("--layers", o.n_layers, "blocks")->check(CLI::Range(1, 1024));
  app.add_option("--heads", o.n_heads, "attention heads")->check(CLI::Range(1, 1024));
  app.add_option("--d-ff", o.d_ff, "FFN width (0 = 4 * d_model)")->check(CLI::Range(0, 1 << 20));
  app.add_option("--seq", o.seq, "sequence length T")->check(CLI::Range(1, 1 << 16));
  app.add_option("--batch", o.batch, "batch size B")->check(CLI::Range(1, 1 << 16));
  app.add_option("--seed", o.seed, "seed for the weights and the random tokens");
  app.add_option("--placement", o.placement, "normalization placement (normlab variants), with its defaults");
  app.add_flag("--marks", o.marks, "print CLOCK_MONOTONIC times of the phases to stderr (to cut a perf profile)");
  app.add_flag("--profile", o.profile,
               "time every op kind and the optimizer over the timed steps: a table on stderr, \"profile\" in the JSON");
  app.add_flag("!--no-fuse", o.fuse, "run every op on its own (engine.fuse = false): the unfused baseline");
  app.add_flag("--recompute-attention", o.recompute_attention,
               "recompute attention's probabilities in backward instead of saving them (engine.recompute_attention)");
  app.add_flag("--bf16", o.bf16, "train.precision = bf16: bf16 GEMM operands, fp32 sums, weights and optimizer");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "normlab_bench_train: %s\n", e.what());
    return 1;
  }
}
