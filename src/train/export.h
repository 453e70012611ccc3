#pragma once
// `normlab export`: a run's weights for readers outside normlab. The output directory holds
//   model.safetensors  the weights only (no optim.* moments), under the names of docs/model.md;
//   config.json        the resolved model config and every constant a reader needs besides the weights
//                      (DeepNorm's α and β, Admin's ω, ε, the embedding and attention scales, the vocabulary
//                      with [MASK], the special ids and how a batch starts and pads);
//   tokenizer.model    the run's SentencePiece model.
// tools/to_torch.py builds the PyTorch model from that directory alone (docs/model.md, "Export").
#include <filesystem>
#include <span>
#include <string>

#include "common/config_reader.h"
#include "io/safetensors.h"
#include "train/train_config.h"

namespace normlab::train {

// v2: model.safetensors carries data_crc32 (export_checksum), which tools/to_torch.py checks; v1 had no checksum.
inline constexpr const char* kExportFormat = "normlab-export-v2";

struct ExportSummary {
  int step = 0;
  size_t tensors = 0, skipped = 0;  // weights written, optimizer tensors left out
  std::filesystem::path out_dir;
};

// The special ids of the run's tokenizer and how its batches use them (the "vocab" and "batches" sections).
struct Vocabulary {
  int tokenizer_size = 0;
  int unk_id = -1, bos_id = -1, eos_id = -1;
};

// The config.json of an export: the model, the constants its forward uses that are not weights, the vocabulary.
Json export_config(const RunConfig& config, const Vocabulary& vocab, int step);

// The metadata value `data_crc32` of an export's model.safetensors: CRC-32 over every tensor's bytes, one after
// another in name order, as 8 lowercase hex digits.
std::string export_checksum(std::span<const io::TensorToWrite> tensors);

// Writes the export of run_dir (its checkpoint) into out_dir (created if missing). The tokenizer comes from
// data_dir, or from the run's data.dir when data_dir is empty.
ExportSummary export_run(const std::filesystem::path& run_dir, const std::filesystem::path& out_dir,
                         const std::filesystem::path& data_dir = {});

}  // namespace normlab::train
