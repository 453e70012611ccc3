#include "train/hf_import.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "io/atomic_file.h"
#include "model/transformer.h"
#include "train/checkpoint.h"
#include "train/hf_families.h"
#include "train/hf_tokens.h"
#include "train/memory.h"

namespace normlab::train {

namespace fs = std::filesystem;
using Entry = io::SafetensorsFile::Entry;

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The shape the checkpoint must store for normlab's `shape` under `rule`; `group`: query heads per key/value head.
std::vector<int64_t> hf_shape(const HfTensorRule& rule, std::vector<int64_t> shape, int64_t group) {
  if (rule.layout == HfLayout::kv_heads) shape[0] /= group;
  if (rule.layout == HfLayout::conv1d)
    shape = shape.size() == 2 ? std::vector<int64_t>{shape[1], rule.parts * shape[0]}
                              : std::vector<int64_t>{rule.parts * shape[0]};
  return shape;
}

// Normlab's `shape` from the checkpoint's tensor (already checked to have hf_shape), byte for byte: only the order of
// the elements changes, so a BF16 value stays the same BF16 value.
std::vector<std::byte> relayout(const Entry& e, const HfTensorRule& rule, const std::vector<int64_t>& shape,
                                int64_t head_dim, int64_t group) {
  const size_t es = io::dtype_size(e.dtype);
  std::vector<std::byte> out(static_cast<size_t>(numel(shape)) * es);
  const std::byte* src = e.data.data();
  if (rule.layout == HfLayout::kv_heads) {
    // transformers' repeat_kv: query head h reads key/value head h / group.
    const size_t block = static_cast<size_t>(head_dim * (numel(shape) / shape[0])) * es;
    for (int64_t h = 0; h < shape[0] / head_dim; ++h)
      std::memcpy(out.data() + static_cast<size_t>(h) * block, src + static_cast<size_t>(h / group) * block, block);
  } else if (shape.size() == 1) {  // a Conv1D bias: its part's slice
    std::memcpy(out.data(), src + static_cast<size_t>(rule.part * shape[0]) * es, out.size());
  } else {  // a Conv1D weight [in, parts·out] (y = x W): its part's columns, transposed to [out, in]
    const int64_t n_out = shape[0], n_in = shape[1], row = rule.parts * n_out;
    for (int64_t o = 0; o < n_out; ++o)
      for (int64_t i = 0; i < n_in; ++i)
        std::memcpy(out.data() + static_cast<size_t>(o * n_in + i) * es,
                    src + static_cast<size_t>(i * row + rule.part * n_out + o) * es, es);
  }
  return out;
}

bool floating(io::Dtype t) {
  return t == io::Dtype::F32 || t == io::Dtype::F64 || t == io::Dtype::BF16 || t == io::Dtype::F16;
}

// The model's parameters as checkpoint entries; a relaid tensor's bytes are kept in `owned`, the others point into
// the mapped shards.
struct Converted {
  std::vector<io::TensorToWrite> entries;
  std::vector<std::vector<std::byte>> owned;
};

// The checkpoint's tensor for normlab parameter `ours` of `shape`, checked and laid out.
void convert(HfCheckpoint& checkpoint, const HfFamily& family, const model::ModelConfig& c, const std::string& ours,
             const std::vector<int64_t>& shape, Converted& out) {
  HfTensorRule rule;
  if (!hf_source(family, ours, &rule))
    fail("normlab's {} model has a parameter '{}' that the importer does not map: a normlab bug, please report it",
         family.model_type, ours);
  const Entry* e = checkpoint.take(rule.name);
  if (!e)
    fail(
        "{}: no file of the checkpoint ({}) holds tensor '{}', which a {} model as config.json describes it needs: "
        "the download is incomplete or config.json belongs to another model",
        checkpoint.dir().string(), checkpoint.files_text(), rule.name, family.model_type);
  const std::vector<int64_t> want = hf_shape(rule, shape, c.n_heads / family.kv_heads);
  if (e->shape != want)
    fail(
        "{}: tensor '{}' has shape {} but config.json's sizes give {}: the weights and config.json do not belong "
        "together",
        e->file, e->name, shape_text(e->shape), shape_text(want));
  if (!floating(e->dtype))
    fail("{}: tensor '{}' has dtype {}, not a floating-point weight (F32, BF16, F16 or F64): the file is damaged",
         e->file, e->name, io::dtype_name(e->dtype));
  if (rule.layout == HfLayout::copy) {
    out.entries.push_back({ours, e->dtype, shape, e->data.data()});
    return;
  }
  out.owned.push_back(relayout(*e, rule, shape, c.head_dim(), c.n_heads / family.kv_heads));
  out.entries.push_back({ours, e->dtype, shape, out.owned.back().data()});
}

// A tensor that no parameter took means the model would not compute what the released one does.
void check_everything_taken(const HfCheckpoint& checkpoint, const HfFamily& family) {
  for (const Entry* e : checkpoint.untaken()) {
    const auto buffer = [&](const std::string& end) { return e->name.ends_with(end); };
    if (std::any_of(family.buffers.begin(), family.buffers.end(), buffer)) continue;
    fail(
        "{}: tensor '{}' has no place in a {} model as config.json describes it, so normlab would compute without "
        "it: check config.json (tie_word_embeddings, biases, num_hidden_layers) against the weights",
        e->file, e->name, family.model_type);
  }
}

RunConfig run_config(const HfCheckpoint& checkpoint, const HfFamily& family, const fs::path& run_dir, int seq_len) {
  RunConfig config;
  config.model = model::read_model_config(family.model, checkpoint.config_path().string() + " (as normlab's model)");
  // The run's token data: the model's vocabulary, prepared with its tokenizer (docs/usage.md).
  config.data_dir = (run_dir / "data").string();
  config.train.steps = 1;  // the checkpoint's step: nothing was trained here
  config.train.batch_size = 1;
  if (seq_len < 0 || seq_len > config.model.max_seq_len)
    fail("--seq-len {} is outside 1..{}, the window {} allows (its max_seq_len): give a window in that range", seq_len,
         config.model.max_seq_len, checkpoint.config_path().string());
  config.train.seq_len = seq_len > 0 ? seq_len : std::min(config.model.max_seq_len, 512);
  config.train.eval_batches = 4;
  return config;
}

void write_import_json(const fs::path& run_dir, const fs::path& dir, const HfImportSummary& s) {
  Json doc{{"format", "normlab-import-v1"},     {"source", fs::absolute(dir).string()},
           {"model_type", s.model_type},        {"files", s.files},
           {"parameters", s.parameters},        {"parameters_by_dtype", s.parameters_by_dtype},
           {"open_memory_bytes", s.open_bytes}, {"notes", s.notes}};
  io::write_file_atomic(run_dir / "import.json", doc.dump(2) + "\n");
}

}  // namespace

HfImportSummary import_hf_checkpoint(const fs::path& dir, const fs::path& run_dir, const fs::path& text,
                                     const fs::path& token_ids, int seq_len) {
  if (fs::exists(run_dir / kCheckpointFile))
    fail("{} already holds a checkpoint: import into a new folder (--out)", run_dir.string());
  HfCheckpoint checkpoint(dir);
  const HfFamily family = read_hf_family(checkpoint);
  HfImportSummary s{.model_type = family.model_type,
                    .files = checkpoint.files_text(),
                    .config = run_config(checkpoint, family, run_dir, seq_len),
                    .notes = family.notes};
  // The parameters' names and shapes, from the model's graph before anything is allocated: the graph a run of this
  // config opens, so that its memory estimate is the one eval, generate and probe will make.
  const auto m = model::build_unplanned_model(s.config.model, s.config.train.batch_size, s.config.train.seq_len);
  Converted converted;
  converted.owned.reserve(m->graph.parameters().size());
  for (engine::TensorId id : m->graph.parameters()) {
    const engine::TensorSpec& p = m->graph.spec(id);
    const std::vector<int64_t> shape(p.shape.dims.begin(), p.shape.dims.begin() + p.shape.rank);
    convert(checkpoint, family, s.config.model, p.name, shape, converted);
    s.parameters += numel(shape);
    s.parameters_by_dtype[std::string(io::dtype_name(converted.entries.back().dtype))] += numel(shape);
  }
  check_everything_taken(checkpoint, family);
  const HfTokens tokens = read_hf_tokens(checkpoint, s.config.model.vocab_size, text, token_ids);
  fs::create_directories(run_dir);
  write_checkpoint(run_dir, converted.entries, s.config, 1,
                   {{"imported_from", fs::absolute(dir).string()}, {"model_type", family.model_type}});
  save_checkpoint_summary(run_dir, s.config, 1);
  io::write_file_atomic(run_dir / "config.json", to_json(s.config).dump(2) + "\n");
  m->graph.set_gradients(false);  // eval, generate and the probes of activations open it inference-only
  for (const io::TensorToWrite& e : converted.entries)  // and keep its BF16 weights in bf16 (model::keep_bf16_weights)
    if (e.dtype == io::Dtype::BF16) m->graph.store_as_bf16(m->graph.at(e.name));
  MemoryEstimate open =
      estimate_memory(*m, {.gradients = false, .checkpoint_file = fs::file_size(run_dir / kCheckpointFile)});
  open.resident = 0;  // this process's mapped shards are not the opening run's
  s.open_bytes = open.to_allocate();
  s.open_breakdown = open.breakdown();
  write_import_json(run_dir, dir, s);
  if (!tokens.kind.empty()) {
    s.tokens = write_hf_tokens(tokens, s.config.model.vocab_size, run_dir / "data");
    s.tokenizer = tokens.kind;
  }
  return s;
}

}  // namespace normlab::train
