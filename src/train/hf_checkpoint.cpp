#include "train/hf_checkpoint.h"

#include "common/error.h"
#include "io/atomic_file.h"

namespace normlab::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

Json read_json(const fs::path& file, std::string_view what, std::string_view hint) {
  Json doc = Json::parse(io::read_file(file, what, hint), nullptr, false);
  if (!doc.is_object())
    fail("{} is not a JSON object: it is damaged or not a Hugging Face {}; download it again", file.string(), what);
  return doc;
}

// The index's weight_map: tensor name → shard file name, each a plain name in the checkpoint's folder.
std::map<std::string, std::string> weight_map(const fs::path& index) {
  const Json doc = read_json(index, "checkpoint index", "download it with the shards");
  const auto it = doc.find("weight_map");
  if (it == doc.end() || !it->is_object())
    fail("{} has no \"weight_map\" object naming each tensor's shard: download the index again", index.string());
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : it->items()) {
    const std::string shard = file.is_string() ? file.get<std::string>() : "";
    // A shard outside the folder (a path, "..") is not a shard of this checkpoint.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      fail(
          "{}: the weight_map entry of tensor '{}' is not the file name of a shard in its folder: download the "
          "index again",
          index.string(), printable(name));
    map[name] = shard;
  }
  return map;
}

}  // namespace

HfCheckpoint::HfCheckpoint(const fs::path& dir) : dir_(dir), config_path_(dir / "config.json") {
  if (!fs::is_directory(dir))
    fail("{} is not a folder: give the folder of a Hugging Face checkpoint (config.json and its safetensors files)",
         dir.string());
  config_ = read_json(config_path_, "config.json",
                      "a Hugging Face checkpoint folder holds config.json beside its safetensors files; download it");
  if (fs::exists(dir / kIndexFile)) {
    open_shards(dir / kIndexFile);
  } else if (fs::exists(dir / kSingleFile)) {
    open_single();
  } else {
    fail(
        "{} holds neither {} nor {}: normlab reads the safetensors layout only (convert a pytorch_model.bin with "
        "transformers' save_pretrained(safe_serialization=True))",
        dir.string(), kSingleFile, kIndexFile);
  }
}

void HfCheckpoint::open_single() {
  files_.reserve(1);
  add_file(dir_ / kSingleFile);
}

void HfCheckpoint::open_shards(const fs::path& index) {
  const std::map<std::string, std::string> map = weight_map(index);
  std::map<std::string, std::string> shards;  // shard → one tensor the index puts there, for the message
  for (const auto& [name, shard] : map) shards.emplace(shard, name);
  for (const auto& [shard, name] : shards)
    if (!fs::exists(dir_ / shard))
      fail("{} is missing: {} puts tensor '{}' in it; download that shard into {}", (dir_ / shard).string(),
           index.filename().string(), printable(name), dir_.string());
  files_.reserve(shards.size());  // entries_ points into them: no reallocation after this
  for (const auto& [shard, name] : shards) add_file(dir_ / shard);
  for (const auto& [name, shard] : map)
    if (!entries_.contains(name) || entries_.at(name)->file != (dir_ / shard).string())
      fail(
          "{}: {} puts tensor '{}' in it, but it does not hold it: the index and the shards are from different "
          "downloads; download them again",
          (dir_ / shard).string(), index.filename().string(), printable(name));
}

void HfCheckpoint::add_file(const fs::path& file) {
  files_.push_back(io::SafetensorsFile::map(file, "checkpoint file"));
  for (const Entry& e : files_.back().entries()) {
    const auto [it, fresh] = entries_.emplace(e.name, &e);
    if (!fresh)
      fail("{}: tensor '{}' is also in {}: a checkpoint holds each tensor once; download it again", file.string(),
           printable(e.name), it->second->file);
  }
}

const HfCheckpoint::Entry* HfCheckpoint::take(const std::string& name) {
  const auto it = entries_.find(name);
  if (it == entries_.end()) return nullptr;
  taken_.insert(name);
  return it->second;
}

std::vector<const HfCheckpoint::Entry*> HfCheckpoint::untaken() const {
  std::vector<const Entry*> out;
  for (const auto& [name, entry] : entries_)
    if (!taken_.contains(name)) out.push_back(entry);
  return out;
}

std::string HfCheckpoint::files_text() const {
  if (files_.size() == 1) return fs::path(files_[0].path()).filename().string();
  return fmt::format("{} shards ({} ...)", files_.size(), fs::path(files_[0].path()).filename().string());
}

}  // namespace normlab::train
