// normlab generate: sample text from a run's checkpoint.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/core.h>

#include "cli/commands.h"
#include "io/tokenizer.h"
#include "io/corpus.h"
#include "model/init.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace normlab::cli {

namespace fs = std::filesystem;

void add_generate(CLI::App& app) {
  struct Args {
    std::string run, prompt = "In the beginning";
    int tokens = 60, top_k = 40;
    double temperature = 0.8;
    uint64_t seed = 1;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("generate", "sample text from a run's checkpoint");
  cmd->add_option("-r,--run", args->run, "run directory")->required();
  cmd->add_option("-p,--prompt", args->prompt, "text to continue")->capture_default_str();
  cmd->add_option("-n,--tokens", args->tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("-t,--temperature", args->temperature, "softmax temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("-k,--top-k", args->top_k, "sample among the k most likely tokens; 0 = all")->capture_default_str();
  cmd->add_option("--seed", args->seed, "sampling seed")->capture_default_str();
  cmd->callback([args] {
    const fs::path file = fs::path(args->run) / train::kCheckpointFile;
    train::RunConfig config = train::checkpoint_config(file);
    train::set_threads(config.train.threads);
    io::Tokenizer tok = io::Tokenizer::load(fs::path(config.data_dir) / "tokenizer.model");
    const int window = config.train.seq_len;
    auto m = model::build_model(config.model, 1, window);
    train::load_checkpoint(file, *m, nullptr);
    std::vector<int32_t> ids = tok.encode(args->prompt);
    if (ids.empty()) ids.push_back(tok.eos_id() >= 0 ? tok.eos_id() : 0);
    std::vector<int32_t> input(static_cast<size_t>(window)), unused(static_cast<size_t>(window), 0);
    model::Rng rng(args->seed);
    const int vocab = config.model.vocab_size;
    std::vector<std::pair<float, int32_t>> ranked(static_cast<size_t>(vocab));
    const size_t prompt_tokens = ids.size();
    for (int n = 0; n < args->tokens; ++n) {
      // The model is causal, so the window's tail padding cannot affect position `last`.
      const size_t context = std::min(ids.size(), static_cast<size_t>(window));
      std::fill(input.begin(), input.end(), 0);
      std::copy(ids.end() - static_cast<std::ptrdiff_t>(context), ids.end(), input.begin());
      m->set_batch(input.data(), unused.data());
      m->forward(false);
      const float* logits = m->graph.data<float>(m->logits) + (context - 1) * static_cast<size_t>(vocab);
      for (int v = 0; v < vocab; ++v) ranked[static_cast<size_t>(v)] = {logits[v], v};
      std::sort(ranked.begin(), ranked.end(), std::greater<>());
      int32_t next = ranked[0].second;
      if (args->temperature > 0) {
        const size_t k = args->top_k > 0 ? std::min<size_t>(static_cast<size_t>(args->top_k), ranked.size()) : ranked.size();
        double total = 0;
        std::vector<double> p(k);
        for (size_t i = 0; i < k; ++i) total += (p[i] = std::exp((ranked[i].first - ranked[0].first) / args->temperature));
        double u = rng.uniform() * total;
        for (size_t i = 0; i < k; ++i) {
          if ((u -= p[i]) <= 0) {
            next = ranked[i].second;
            break;
          }
        }
      }
      ids.push_back(next);
    }
    std::cout << args->prompt << tok.decode(std::span(ids).subspan(prompt_tokens)) << "\n";
  });
}

}  // namespace normlab::cli
