#pragma once
// A checkpoint folder in the Hugging Face layout, as `save_pretrained` writes it and the Hub serves it:
//
//   config.json                                the architecture (model_type) and its sizes
//   model.safetensors                          the weights in one file, or
//   model-0000X-of-0000Y.safetensors + model.safetensors.index.json   shards, the index's weight_map naming the shard
//                                              of every tensor
//
// The files are mapped, not read (io::SafetensorsFile::map): a shard's bytes come into memory only as its tensors are
// copied out. Every problem (a missing file or shard, an index that names a tensor its shard lacks, a tensor in two
// shards) ends in one sentence naming the file and, where there is one, the tensor.
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/config_reader.h"
#include "io/safetensors.h"

namespace normlab::train {

class HfCheckpoint {
 public:
  using Entry = io::SafetensorsFile::Entry;

  explicit HfCheckpoint(const std::filesystem::path& dir);
  HfCheckpoint(const HfCheckpoint&) = delete;  // entries_ points into files_
  HfCheckpoint& operator=(const HfCheckpoint&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& config_path() const { return config_path_; }
  const Json& config() const { return config_; }
  bool has(const std::string& name) const { return entries_.contains(name); }
  // The tensor `name` (nullptr if no file holds it), marked as used.
  const Entry* take(const std::string& name);
  // The tensors nobody took, by name: what an import would leave behind.
  std::vector<const Entry*> untaken() const;
  // The weights' files, for messages: "model.safetensors" or "3 shards (model-00001-of-00003.safetensors ...)".
  std::string files_text() const;

 private:
  void open_single();
  void open_shards(const std::filesystem::path& index);
  void add_file(const std::filesystem::path& file);

  std::filesystem::path dir_, config_path_;
  Json config_;
  std::vector<io::SafetensorsFile> files_;
  std::map<std::string, const Entry*> entries_;
  std::set<std::string> taken_;
};

}  // namespace normlab::train
