// normlab generate: sample text from a run's checkpoint.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli/commands.h"
#include "common/error.h"
#include "engine/parallel.h"
#include "io/tokenizer.h"
#include "model/generate.h"
#include "model/weights.h"
#include "train/checkpoint.h"
#include "train/run.h"

namespace normlab::cli {

namespace fs = std::filesystem;

void add_inference_options(CLI::App* cmd, model::InferenceOptions& options) {
  // Ranges are checked by apply_inference_options, not by CLI11's validators, whose message quotes a range up to
  // 1.8e308.
  cmd->add_option("--attn-top-k", options.attn_top_k,
                  "approximate attention: each query keeps only its k largest logits (0 = every key)")
      ->capture_default_str();
  cmd->add_option("--norm-sample", options.norm_sample,
                  "approximate LayerNorm/RMSNorm statistics from every s-th feature (1 = every feature)")
      ->capture_default_str();
}

Progress::Progress(std::string what, int64_t total, int64_t quiet_below)
    : what_(std::move(what)), total_(total), shown_(total >= quiet_below) {}

void Progress::operator()(int64_t done) {
  if (!shown_ || done * 10 / total_ <= tenth_) return;
  tenth_ = done * 10 / total_;
  std::cerr << fmt::format("{}: {} of {} ({}%)\n", what_, done, total_, tenth_ * 10) << std::flush;
}

void apply_inference_options(model::Model& m, const model::InferenceOptions& options, const std::string& run) {
  if (options.attn_top_k < 0)
    fail("--attn-top-k {}: give 0 (every key) or the number of keys each query keeps", options.attn_top_k);
  if (options.norm_sample < 1)
    fail("--norm-sample {}: give 1 (every feature) or the stride of the features sampled", options.norm_sample);
  const auto [attention, norms] = model::set_inference_options(m, options);
  if (options.norm_sample > 1 && norms == 0)
    fail("--norm-sample {}: run {} has no LayerNorm or RMSNorm (model.norm.type = {}), whose statistics it samples",
         options.norm_sample, run, m.config.norm.type);
  if (options.attn_top_k > 0 && attention == 0) fail("--attn-top-k: run {} has no attention", run);
}

// The most tokens one generate makes (at a few thousand tokens a second on 2 cores, minutes already), and the fewest
// that show progress.
constexpr int kMaxTokens = 1'000'000;
constexpr int kQuietTokens = 2000;

namespace {

// --tokens, --temperature and --top-k within their ranges, or one sentence naming the option.
void check_sampling(int tokens, double temperature, int top_k) {
  if (tokens < 1 || tokens > kMaxTokens)
    fail(
        "--tokens {}: give the number of tokens to generate, 1 or more and at most {} (more would run for hours: "
        "continue the text with it as --prompt)",
        tokens, kMaxTokens);
  if (!(temperature >= 0) || !std::isfinite(temperature))
    fail("--temperature {}: give 0 (greedy) or a positive number (1 samples the model's distribution)", temperature);
  if (top_k < 0) fail("--top-k {}: give 0 (every token) or a positive number of tokens", top_k);
}

// The SentencePiece tokenizer a decoder run's prompt goes through; fails, naming the run, for an encoder, an
// encoder-decoder, token data made without SentencePiece or a tokenizer that no longer matches the model.
io::Tokenizer prompt_tokenizer(const train::RunConfig& config, const std::string& run) {
  if (config.model.encoder())
    fail(
        "{} is an encoder (model.shape = encoder): it sees the whole text at once and fills in masked tokens, it "
        "does not continue a prompt; `normlab eval --run {}` gives its masked-LM loss and accuracy",
        run, run);
  if (config.model.encoder_decoder())
    fail("{} is an encoder-decoder (a translation model): `normlab translate --run {} --input FILE` translates", run,
         run);
  const fs::path tokenizer = fs::path(config.data_dir) / "tokenizer.model";
  // An imported run's ids may come from GPT-2's BPE or another tokenizer (normlab import --token-ids): generate
  // reads and writes text only through SentencePiece.
  if (!fs::exists(tokenizer) && fs::exists(fs::path(config.data_dir) / "meta.json"))
    fail(
        "{} has no tokenizer.model: its token data was not made with SentencePiece (see its meta.json's "
        "tokenizer_kind), and generate turns a prompt into ids only through one; eval and probe run on it",
        config.data_dir);
  io::Tokenizer tok = io::Tokenizer::load(tokenizer);
  if (tok.vocab_size() != config.model.vocab_size)
    fail(
        "{} has {} tokens but the model of {} has model.vocab_size = {}: the run's data.dir ({}) no longer holds the "
        "tokenizer it was trained with",
        tokenizer.string(), tok.vocab_size(), run, config.model.vocab_size, config.data_dir);
  return tok;
}

}  // namespace

void add_generate(CLI::App& app) {
  struct Args {
    std::string run, prompt = "In the beginning";
    int tokens = 60, top_k = 40;
    double temperature = 0.8;
    uint64_t seed = 1;
    bool no_cache = false;
    model::InferenceOptions inference;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("generate", "sample text from a run's checkpoint");
  cmd->add_option("-r,--run", args->run, "run directory")->required();
  cmd->add_option("-p,--prompt", args->prompt, "text to continue")->capture_default_str();
  cmd->add_option("-n,--tokens", args->tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("-t,--temperature", args->temperature, "softmax temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("-k,--top-k", args->top_k, "sample among the k most likely tokens; 0 = all")->capture_default_str();
  cmd->add_option("--seed", args->seed, "sampling seed")->capture_default_str();
  cmd->add_flag("--no-cache", args->no_cache,
                "rerun the whole window for every token instead of keeping each position's keys and values (slower; "
                "the context then always holds the last train.seq_len tokens)");
  add_inference_options(cmd, args->inference);
  cmd->callback([args] {
    check_sampling(args->tokens, args->temperature, args->top_k);
    // The checkpoint is read once; the cached path builds only the decoding model (batch 1, a cache of
    // train.seq_len positions) and loads the weights into it, the uncached one the batch-1 model of the run.
    const train::CheckpointFile checkpoint = train::read_checkpoint(fs::path(args->run) / train::kCheckpointFile);
    const train::RunConfig config = train::checkpoint_config(checkpoint);
    const io::Tokenizer tok = prompt_tokenizer(config, args->run);
    std::vector<int32_t> ids = tok.encode(args->prompt);
    if (ids.empty()) ids.push_back(tok.eos_id() >= 0 ? tok.eos_id() : 0);
    const size_t prompt_tokens = ids.size();
    model::Sampler sampler(config.model.vocab_size, args->temperature, args->top_k, args->seed);
    std::optional<train::Run> run;  // --no-cache: the run's batch-1 model
    std::unique_ptr<model::Model> decoder;
    if (args->no_cache) {
      run = train::open_run(args->run, 1, {.gradients = false});
      apply_inference_options(*run->model, args->inference, args->run);
    } else {
      engine::set_threads(config.train.threads);
      decoder = model::build_decoding_model(config.model, 1, config.train.seq_len, 1, engine::DType::f32, nullptr,
                                            [&](model::Model& d) { model::keep_bf16_weights(d, checkpoint.file); });
      train::load_checkpoint(checkpoint, *decoder, nullptr);
      apply_inference_options(*decoder, args->inference, args->run);
    }
    Progress progress("generate", args->tokens, kQuietTokens);
    const auto start = std::chrono::steady_clock::now();
    if (run) model::generate_uncached(*run->model, ids, args->tokens, sampler, std::ref(progress));
    else model::generate(*decoder, ids, args->tokens, sampler, std::ref(progress));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << args->prompt << tok.decode(std::span(ids).subspan(prompt_tokens)) << "\n";
    std::cerr << fmt::format(
        "generated {} tokens in {:.2f} s ({:.0f} tokens/s, {}; reading the {}-token prompt included)\n", args->tokens,
        seconds, args->tokens / std::max(seconds, 1e-9),
        args->no_cache ? "the whole window rerun per token" : "key-value cache", prompt_tokens);
  });
}

}  // namespace normlab::cli
