#pragma once
// `normlab import DIR --out RUN`: a released checkpoint in the Hugging Face layout (train/hf_checkpoint.h) of a family
// normlab has as a preset (train/hf_families.h) becomes a run folder that eval, generate and probe open as they open
// a trained run: checkpoint.safetensors (the weights under normlab's names, in the checkpoint's own dtype: BF16 stays
// BF16 on disk and is widened exactly to fp32 when a run loads it; no AdamW moments), checkpoint.json, config.json
// and import.json (where the weights came from and how the run departs from the released model).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/corpus.h"
#include "train/train_config.h"

namespace normlab::train {

struct HfImportSummary {
  std::string model_type;
  std::string files;  // the checkpoint's weight files, for people
  RunConfig config;
  std::int64_t parameters = 0;
  std::map<std::string, std::int64_t> parameters_by_dtype;  // "BF16" → how many parameters are stored so
  std::vector<std::string> notes;
  std::optional<io::PrepareSummary> tokens;  // with `text` or `token_ids`
  std::string tokenizer;                     // what made them: "sentencepiece", "gpt2-bpe" or "token-ids"
  // What opening the run (eval, generate, probe) will allocate, by the memory check they make (train/memory.h), and
  // its parts: a model too big for this machine is told so here, not after a long import elsewhere.
  std::size_t open_bytes = 0;
  std::string open_breakdown;
};

// Reads `dir` and writes the run folder `run_dir` (created; refused when it already holds a checkpoint). Every
// refusal is one sentence naming the file and the tensor or key: an unknown model_type, a missing shard or tensor, a
// tensor of the wrong shape, a tensor the model would not use.
//
// With `text` or `token_ids`, also the run's token data (RUN/data, its data.dir), by train/hf_tokens.h: the text
// through the checkpoint's tokenizer.model (SentencePiece) or vocab.json and merges.txt (GPT-2's BPE), or ids made
// elsewhere. Refused before anything is written when the checkpoint has neither tokenizer, the tokenizer is not the
// model's vocabulary, or an id is outside it.
//
// `seq_len` is the window eval and probe read (train.seq_len), 1 to the model's max_seq_len; 0 takes max_seq_len up
// to 512. Activations grow with it: a shorter window is how a 7B model's layer-drop fits in 24 GB.
HfImportSummary import_hf_checkpoint(const std::filesystem::path& dir, const std::filesystem::path& run_dir,
                                     const std::filesystem::path& text = {},
                                     const std::filesystem::path& token_ids = {}, int seq_len = 0);

}  // namespace normlab::train
