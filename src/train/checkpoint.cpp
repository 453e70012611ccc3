#include "train/checkpoint.h"

#include "common/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace normlab::train {

namespace fs = std::filesystem;
namespace eng = normlab::engine;

namespace {
constexpr const char* kFormat = "normlab-checkpoint-v1";

std::vector<int64_t> dims(const eng::Shape& s) { return {s.dims.begin(), s.dims.begin() + s.rank}; }

io::SafetensorsFile open_checkpoint(const fs::path& file) {
  auto f = io::SafetensorsFile::read(file, "checkpoint");
  auto it = f.metadata().find("format");
  if (it == f.metadata().end() || it->second != kFormat)
    fail("{}: not a normlab checkpoint (metadata.format is missing or not {})", file.string(), kFormat);
  return f;
}
}  // namespace

void save_checkpoint(const fs::path& run_dir, const model::Model& m, AdamW& opt, const RunConfig& config, int step) {
  std::vector<io::TensorToWrite> entries = model::weight_entries(m);
  const auto& params = m.graph.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const eng::TensorSpec& p = m.graph.spec(params[i]);
    entries.push_back({"optim.m." + p.name, io::Dtype::F64, dims(p.shape), opt.first_moment(i).data()});
    entries.push_back({"optim.v." + p.name, io::Dtype::F64, dims(p.shape), opt.second_moment(i).data()});
  }
  const Json cfg = to_json(config);
  io::write_safetensors(run_dir / kCheckpointFile, entries,
                        {{"format", kFormat}, {"step", std::to_string(step)}, {"config", cfg.dump()}});
  Json human{{"format", kFormat}, {"step", step}, {"weights", kCheckpointFile}, {"optimizer", "AdamW, optim.m.* and optim.v.* in the same file"},
             {"rng", "stateless: batches and dropout masks are functions of (train.seed, step)"}, {"config", cfg}};
  io::write_file_atomic(run_dir / kCheckpointJson, human.dump(2) + "\n");
}

int load_checkpoint(const fs::path& file, model::Model& m, AdamW* opt) {
  auto f = open_checkpoint(file);
  model::load_weights(m, f, {"optim."});
  if (opt) {
    const auto& params = m.graph.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& name = m.graph.spec(params[i]).name;
      opt->first_moment(i) = f.at("optim.m." + name).to_f64_vector();
      opt->second_moment(i) = f.at("optim.v." + name).to_f64_vector();
    }
  }
  const std::string& step = f.metadata().at("step");
  try {
    return std::stoi(step);
  } catch (const std::exception&) {
    fail("{}: metadata.step '{}' is not a number; the checkpoint is corrupted", file.string(), step);
  }
}

RunConfig checkpoint_config(const fs::path& file) {
  auto f = open_checkpoint(file);
  auto it = f.metadata().find("config");
  if (it == f.metadata().end()) fail("{}: metadata.config is missing; the checkpoint is corrupted", file.string());
  Json doc = Json::parse(it->second, nullptr, false);
  if (doc.is_discarded()) fail("{}: metadata.config is not valid JSON; the checkpoint is corrupted", file.string());
  return read_run_config(doc, file.string() + " (stored config)");
}

}  // namespace normlab::train
