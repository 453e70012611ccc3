#include "train/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <type_traits>
#include <utility>

#include "common/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace normlab::train {

namespace fs = std::filesystem;
namespace eng = normlab::engine;

namespace {
// v2 checkpoints always carry metadata_fnv1a64; v1 was written both before it existed and after, so a v1 file alone
// may lack it. A missing checksum is excused only where the format says v1.
constexpr const char* kFormat = "normlab-checkpoint-v2";
constexpr const char* kFormatBeforeMetadataChecksum = "normlab-checkpoint-v1";

std::vector<int64_t> dims(const eng::Shape& s) { return {s.dims.begin(), s.dims.begin() + s.rank}; }

// FNV-1a over every tensor's bytes in name order: flipped bytes in the data section are caught on load.
template <typename Entries, typename Bytes>
std::string checksum(const Entries& entries, Bytes bytes_of) {
  std::vector<const typename Entries::value_type*> sorted;
  for (const auto& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto* e : sorted) hash = io::fnv1a64(bytes_of(*e), hash);
  return fmt::format("{:016x}", hash);
}

constexpr const char* kMetadataChecksum = "metadata_fnv1a64";

io::SafetensorsFile open_checkpoint(const fs::path& file) {
  // Mapped, not read: a checkpoint is only ever replaced by a rename, so the mapped file never changes under it.
  auto f = io::SafetensorsFile::map(file, "checkpoint");
  auto it = f.metadata().find("format");
  const bool v1 = it != f.metadata().end() && it->second == kFormatBeforeMetadataChecksum;
  if (it == f.metadata().end() || (it->second != kFormat && !v1))
    fail("{}: not a normlab checkpoint (metadata.format is missing or not {})", file.string(), kFormat);
  auto sum = f.metadata().find("data_fnv1a64");
  const std::string actual = checksum(f.entries(), [](const io::SafetensorsFile::Entry& e) {
    return std::string_view(reinterpret_cast<const char*>(e.data.data()), e.data.size());
  });
  if (sum == f.metadata().end() || sum->second != actual)
    fail("{}: the checkpoint is corrupted (data checksum mismatch); resume from an earlier copy or train anew",
         file.string());
  const auto meta_sum = f.metadata().find(kMetadataChecksum);
  if (meta_sum == f.metadata().end() && !v1)
    fail(
        "{}: the checkpoint is corrupted (metadata.{} is missing, and its format {} always has it); resume from an "
        "earlier copy or train anew",
        file.string(), kMetadataChecksum, kFormat);
  if (meta_sum != f.metadata().end() && meta_sum->second != metadata_checksum(f.metadata()))
    fail(
        "{}: the checkpoint is corrupted (its metadata, the step or the config, does not match its checksum); resume "
        "from an earlier copy or train anew",
        file.string());
  return f;
}
}  // namespace

// FNV-1a over every entry but its own, key and value, in key order: an edited step or config is caught on load like
// flipped tensor bytes.
std::string metadata_checksum(const std::map<std::string, std::string>& metadata) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& [key, value] : metadata)
    if (key != kMetadataChecksum) hash = io::fnv1a64(value, io::fnv1a64(key + '\0', hash));
  return fmt::format("{:016x}", hash);
}

std::string data_checksum(std::span<const io::TensorToWrite> entries) {
  return checksum(entries, [](const io::TensorToWrite& e) { return io::bytes_of(e); });
}

void save_checkpoint(const fs::path& run_dir, const model::Model& m, AdamW& opt, const RunConfig& config, int step,
                     const Json& trainer_state) {
  std::vector<io::TensorToWrite> entries = model::weight_entries(m);
  const auto& params = m.graph.parameters();
  eng::dispatch_float(m.graph.float_type(), [&]<typename T>() {
    const io::Dtype dtype = std::is_same_v<T, float> ? io::Dtype::F32 : io::Dtype::F64;
    for (size_t i = 0; i < params.size(); ++i) {
      const eng::TensorSpec& p = m.graph.spec(params[i]);
      entries.push_back({"optim.m." + p.name, dtype, dims(p.shape), opt.first_moment<T>(i).data()});
      entries.push_back({"optim.v." + p.name, dtype, dims(p.shape), opt.second_moment<T>(i).data()});
    }
  });
  std::map<std::string, std::string> extra;
  if (!trainer_state.empty()) extra["trainer_state"] = trainer_state.dump();
  write_checkpoint(run_dir, entries, config, step, std::move(extra));
}

void write_checkpoint(const fs::path& run_dir, std::span<const io::TensorToWrite> entries, const RunConfig& config,
                      int step, std::map<std::string, std::string> metadata) {
  metadata["format"] = kFormat;
  metadata["step"] = std::to_string(step);
  metadata["config"] = to_json(config).dump();
  metadata["data_fnv1a64"] = data_checksum(entries);
  metadata[kMetadataChecksum] = metadata_checksum(metadata);
  io::write_safetensors(run_dir / kCheckpointFile, entries, metadata);
}

void save_checkpoint_summary(const fs::path& run_dir, const RunConfig& config, int step) {
  const Json cfg = to_json(config);
  Json human{{"format", kFormat},
             {"step", step},
             {"weights", kCheckpointFile},
             {"optimizer", "AdamW, optim.m.* and optim.v.* in the same file"},
             {"rng", "stateless: batches and dropout masks are functions of (train.seed, step)"},
             {"config", cfg}};
  io::write_file_atomic(run_dir / kCheckpointJson, human.dump(2) + "\n");
}

namespace {

Json trainer_state_of(const io::SafetensorsFile& f, const fs::path& file) {
  auto it = f.metadata().find("trainer_state");
  if (it == f.metadata().end()) return Json::object();
  Json state = parse_json_or_discarded(it->second);
  if (!state.is_object())
    fail("{}: metadata.trainer_state is not a JSON object; the checkpoint is corrupted", file.string());
  return state;
}

}  // namespace

CheckpointFile read_checkpoint(const fs::path& file) { return {file, open_checkpoint(file)}; }

int load_checkpoint(const fs::path& file, model::Model& m, AdamW* opt, Json* trainer_state) {
  return load_checkpoint(read_checkpoint(file), m, opt, trainer_state);
}

int load_checkpoint(const CheckpointFile& checkpoint, model::Model& m, AdamW* opt, Json* trainer_state) {
  const io::SafetensorsFile& f = checkpoint.file;
  const fs::path& file = checkpoint.path;
  if (trainer_state) *trainer_state = trainer_state_of(f, file);
  model::load_weights(m, f, {"optim."});
  if (opt) {
    const auto& params = m.graph.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& name = m.graph.spec(params[i]).name;
      for (const char* moment : {"optim.m.", "optim.v."})
        if (f.at(moment + name).numel() != m.graph.shape(params[i]).numel())
          fail("{}: '{}{}' does not match the parameter's size; the checkpoint is corrupted", file.string(), moment,
               name);
      // Moments in the graph's float type; a checkpoint from before fp32 state holds fp64 ones, rounded here.
      eng::dispatch_float(m.graph.float_type(), [&]<typename T>() {
        const auto values = [&](const char* moment) {
          if constexpr (std::is_same_v<T, float>) return f.at(moment + name).to_f32_vector();
          else return f.at(moment + name).to_f64_vector();
        };
        opt->first_moment<T>(i) = values("optim.m.");
        opt->second_moment<T>(i) = values("optim.v.");
      });
    }
  }
  return checkpoint_step(checkpoint);
}

int checkpoint_step(const CheckpointFile& checkpoint) {
  const auto& metadata = checkpoint.file.metadata();
  const std::string file = checkpoint.path.string();
  const auto it = metadata.find("step");
  const std::string text = it == metadata.end() ? std::string() : it->second;
  int step = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), step);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    fail("{}: metadata.step '{}' is not a whole number; the checkpoint is corrupted: resume from a copy or train anew",
         file, printable(text, 40));
  // A run saves after step 1 at the earliest and after its train.steps at the latest.
  const int steps = checkpoint_config(checkpoint).train.steps;
  if (step < 1 || step > steps)
    fail(
        "{}: metadata.step {} is outside the run's steps 1..{} (train.steps); the checkpoint is corrupted: resume from "
        "a copy or train anew",
        file, step, steps);
  return step;
}

Json checkpoint_trainer_state(const fs::path& file) { return trainer_state_of(open_checkpoint(file), file); }

RunConfig checkpoint_config(const fs::path& file) { return checkpoint_config(read_checkpoint(file)); }

RunConfig checkpoint_config(const CheckpointFile& checkpoint) {
  const io::SafetensorsFile& f = checkpoint.file;
  const fs::path& file = checkpoint.path;
  auto it = f.metadata().find("config");
  if (it == f.metadata().end()) fail("{}: metadata.config is missing; the checkpoint is corrupted", file.string());
  Json doc = parse_json_or_discarded(it->second);
  if (doc.is_discarded()) fail("{}: metadata.config is not valid JSON; the checkpoint is corrupted", file.string());
  return read_run_config(doc, file.string() + " (stored config)");
}

}  // namespace normlab::train
