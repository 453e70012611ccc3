// normlab generate: sample text from a run's checkpoint.
#include <filesystem>
#include <iostream>

#include <fmt/core.h>

#include "cli/commands.h"
#include "common/error.h"
#include "io/tokenizer.h"
#include "model/generate.h"
#include "train/run.h"

namespace normlab::cli {

namespace fs = std::filesystem;

void add_generate(CLI::App& app) {
  struct Args {
    std::string run, prompt = "In the beginning";
    int tokens = 60, top_k = 40;
    double temperature = 0.8;
    uint64_t seed = 1;
    bool no_cache = false;
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
  cmd->callback([args] {
    train::Run run = train::open_run(args->run, 1);
    if (run.config.model.encoder())
      fail(
          "{} is an encoder (model.shape = encoder): it sees the whole text at once and fills in masked tokens, it "
          "does not continue a prompt; `normlab eval --run {}` gives its masked-LM loss and accuracy",
          args->run, args->run);
    if (run.config.model.encoder_decoder())
      fail("{} is an encoder-decoder (a translation model): `normlab translate --run {} --input FILE` translates",
           args->run, args->run);
    io::Tokenizer tok = io::Tokenizer::load(fs::path(run.config.data_dir) / "tokenizer.model");
    std::vector<int32_t> ids = tok.encode(args->prompt);
    if (ids.empty()) ids.push_back(tok.eos_id() >= 0 ? tok.eos_id() : 0);
    const size_t prompt_tokens = ids.size();
    model::Sampler sampler(run.config.model.vocab_size, args->temperature, args->top_k, args->seed);
    if (args->no_cache) {
      model::generate_uncached(*run.model, ids, args->tokens, sampler);
    } else {
      auto decoder = model::build_decoding_model(run.config.model, 1, run.model->seq);
      model::copy_parameters(*run.model, *decoder);
      model::generate(*decoder, ids, args->tokens, sampler);
    }
    std::cout << args->prompt << tok.decode(std::span(ids).subspan(prompt_tokens)) << "\n";
  });
}

}  // namespace normlab::cli
