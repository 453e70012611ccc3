// normlab import: a released Hugging Face checkpoint as a run folder (train/hf_import.h).
#include <iostream>

#include <fmt/core.h>

#include "cli/commands.h"
#include "train/hf_import.h"
#include "train/memory.h"

namespace normlab::cli {

void add_import(CLI::App& app) {
  struct Args {
    std::string dir, out, text, token_ids;
    int seq_len = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "import",
      "read a released checkpoint in the Hugging Face layout (config.json with model.safetensors, or shards and their "
      "index) of GPT-2, Llama, Mistral, Qwen2, Gemma 2 or OLMo 2 into a run folder that eval, generate and probe "
      "open (docs/usage.md, Looking at a released model)");
  cmd->add_option("dir", args->dir, "the checkpoint's folder (config.json and its safetensors files)")->required();
  cmd->add_option("-o,--out", args->out, "the run folder to write (created; must not hold a checkpoint)")->required();
  cmd->add_option("--text", args->text,
                  "also tokenize this text file into RUN/data, the run's token data, with the checkpoint's "
                  "tokenizer.model (SentencePiece: Llama 2, Mistral, Gemma 2) or vocab.json and merges.txt (GPT-2's "
                  "byte-level BPE)");
  cmd->add_option("--token-ids", args->token_ids,
                  "the run's token data from this file of white-space-separated token ids instead, for any other "
                  "tokenizer (each must be below config.json's vocab_size)");
  cmd->add_option("--seq-len", args->seq_len,
                  "the window of tokens eval and probe read (the run's train.seq_len; default the model's "
                  "max_seq_len up to 512): activations grow with it, so a shorter one fits a larger model")
      ->check(CLI::PositiveNumber);
  cmd->callback([args] {
    const train::HfImportSummary s =
        train::import_hf_checkpoint(args->dir, args->out, args->text, args->token_ids, args->seq_len);
    std::string dtypes;
    for (const auto& [dtype, n] : s.parameters_by_dtype)
      dtypes += fmt::format("{}{} {}", dtypes.empty() ? "" : ", ", n, dtype);
    const model::ModelConfig& m = s.config.model;
    std::cout << fmt::format(
        "imported {} from {} ({}): {} layers, d_model {}, {} heads, d_ff {}, vocabulary {}, {} parameters ({}) into "
        "{}\n",
        s.model_type, args->dir, s.files, m.n_layers, m.d_model, m.n_heads, m.d_ff, m.vocab_size, s.parameters, dtypes,
        args->out);
    for (const std::string& note : s.notes) std::cout << "note: " << note << "\n";
    const train::AvailableMemory available = train::available_memory();
    std::cout << fmt::format(
        "opening it without gradients (eval, generate, probe's analyses of activations) needs an estimated {} ({}); "
        "{} is available now ({})\n",
        train::human_bytes(s.open_bytes), s.open_breakdown, train::human_bytes(available.bytes), available.source);
    if (s.tokens) {
      const std::string how = s.tokenizer == "token-ids" ? "read the token ids of " + args->token_ids
                              : s.tokenizer == "gpt2-bpe"
                                  ? "tokenized " + args->text + " with its vocab.json and merges.txt"
                                  : "tokenized " + args->text + " with its tokenizer.model";
      std::cout << fmt::format("{}: {} training and {} validation tokens in {}\n", how, s.tokens->train_tokens,
                               s.tokens->val_tokens, s.tokens->out_dir);
    }
  });
}

}  // namespace normlab::cli
