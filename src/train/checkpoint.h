#pragma once
// Checkpoints: one safetensors file holding the weights (documented names), the AdamW moments
// (`optim.m.<name>`, `optim.v.<name>`) and, in its metadata, the run config and step. Being one
// file written by atomic rename, it is always either the old checkpoint or the new one, whole.
// checkpoint.json beside it repeats the config and state for people and tools.
#include <filesystem>
#include <map>
#include <span>
#include <string>

#include "io/safetensors.h"

#include "model/transformer.h"
#include "train/adamw.h"
#include "train/train_config.h"

namespace normlab::train {

inline constexpr const char* kCheckpointFile = "checkpoint.safetensors";
inline constexpr const char* kCheckpointJson = "checkpoint.json";

// Writes checkpoint.safetensors. `trainer_state` (stored as metadata.trainer_state when not empty) is what the
// trainer keeps between steps besides weights and moments: the spike detectors' windows. The metadata (format,
// step, config, trainer state, data checksum) is covered by metadata.metadata_fnv1a64.
void save_checkpoint(const std::filesystem::path& run_dir, const model::Model& m, AdamW& opt, const RunConfig& config,
                     int step, const Json& trainer_state = Json::object());
// Writes checkpoint.safetensors from `entries` (the weights, and the moments when there are any) with the metadata a
// checkpoint carries (format, step, config, the checksums) added to `metadata`. save_checkpoint and an imported
// model's run (train/hf_import.h) both write through it.
void write_checkpoint(const std::filesystem::path& run_dir, std::span<const io::TensorToWrite> entries,
                      const RunConfig& config, int step, std::map<std::string, std::string> metadata = {});
// Writes checkpoint.json beside it: the same step and config for people and tools (the run resumes from the
// safetensors file alone).
void save_checkpoint_summary(const std::filesystem::path& run_dir, const RunConfig& config, int step);
// The trainer state stored with the checkpoint (an empty object if it has none).
Json checkpoint_trainer_state(const std::filesystem::path& file);

// A checkpoint file read once and checked (its format and data checksum), for its config and its tensors: opening a
// run reads the file once, not once for the config and again for the weights.
struct CheckpointFile {
  std::filesystem::path path;
  io::SafetensorsFile file;
};
CheckpointFile read_checkpoint(const std::filesystem::path& file);

// The step a checkpoint was saved at, checked: a whole number from 1 to its config's train.steps.
int checkpoint_step(const CheckpointFile& checkpoint);

// Restores weights and (if opt is given) optimizer moments; returns the step it was saved at (checkpoint_step). With
// `trainer_state`, also its stored trainer state (from the same read of the file).
int load_checkpoint(const std::filesystem::path& file, model::Model& m, AdamW* opt, Json* trainer_state = nullptr);
int load_checkpoint(const CheckpointFile& checkpoint, model::Model& m, AdamW* opt, Json* trainer_state = nullptr);

// The metadata value `data_fnv1a64` that save_checkpoint stores for these tensors (FNV-1a over their
// bytes in name order); open/load refuse a checkpoint whose data does not match it.
std::string data_checksum(std::span<const io::TensorToWrite> entries);

// The metadata value `metadata_fnv1a64` that save_checkpoint stores for the other metadata entries (the step, the
// config, the trainer state, data_fnv1a64); open/load refuse a checkpoint whose metadata does not match it (one
// written before it existed has none).
std::string metadata_checksum(const std::map<std::string, std::string>& metadata);

// The run config stored in a checkpoint (to rebuild its model).
RunConfig checkpoint_config(const std::filesystem::path& file);
RunConfig checkpoint_config(const CheckpointFile& checkpoint);

}  // namespace normlab::train
