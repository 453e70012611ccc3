#include "train/export.h"

#include <fmt/core.h>
#include <algorithm>
#include <cmath>

#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "model/placement.h"
#include "train/checkpoint.h"

namespace normlab::train {

namespace fs = std::filesystem;

namespace {

std::string activation_equation(model::Activation a) {
  switch (a) {
    case model::Activation::gelu:
      return "fc2(GELU(fc1 x)), GELU(x) = x·Φ(x) (exact, erf)";
    case model::Activation::gelu_tanh:
      return "fc2(GELU(fc1 x)), GELU(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³))) (torch approximate='tanh')";
    case model::Activation::relu:
      return "fc2(max(0, fc1 x))";
    case model::Activation::swiglu:
      return "fc2(SiLU(gate x) ⊙ fc1 x)";
    case model::Activation::geglu:
      return "fc2(GELU(gate x) ⊙ fc1 x), GELU exact (erf)";
    case model::Activation::geglu_tanh:
      return "fc2(GELU(gate x) ⊙ fc1 x), GELU's tanh form";
  }
  fail("internal: activation {} has no equation for the export", static_cast<int>(a));
}

std::string positions_equation(const model::ModelConfig& c) {
  if (c.positions == model::Positions::learned) return "h += P[t], P = <side>embed.positions.weight [max_seq_len, d]";
  if (c.positions == model::Positions::rope)
    return fmt::format(
        "RoPE on q and k of self-attention, per head: pairs (j, j + D/2), θ_j = {}^(−2j/D), (a, b) ↦ (a cos tθ_j − "
        "b sin tθ_j, b cos tθ_j + a sin tθ_j); none in cross-attention",
        c.rope_base);
  return "h += PE[t], PE[t, 2i] = sin(t / 10000^(2i/d)), PE[t, 2i+1] = cos(t / 10000^(2i/d)) (Vaswani et al. §3.5; "
         "no parameters)";
}

// An encoder-decoder's decoder layer: the placement's equation names F, but not which sub-layers a decoder layer has,
// in what order, or what cross-attention reads.
std::string cross_attention_equation(const model::ModelConfig& c) {
  const bool qk_norm = model::option(c, "qk_norm").get<std::string>() != "none";
  return fmt::format(
      "each decoder layer runs three sub-layers in order: self-attention (causal), cross-attention, FFN; each is "
      "placed by the placement equation (a formula states cross's own when it has one), the cross sub-layer's "
      "parameters under decoder.layers.{{i}}.cross.*. In it F(x) = W_O · attention(q = x W_Q, k = m W_K, v = m W_V): "
      "queries from the decoder's stream x as the placement hands it to F, keys and values from the encoder's output m "
      "({}), the source's padded positions masked as keys, no positional rotation{}",
      c.has_final_norm() ? "after encoder.final_norm" : "its last layer's, with no final norm",
      qk_norm ? "; QK-norm normalizes q and k as in self-attention" : "");
}

Json batches(const RunConfig& config, const Vocabulary& v) {
  const model::ModelConfig& c = config.model;
  if (c.encoder_decoder())
    return Json{{"source",
                 "x₁ … x_m EOS, padded with pad_id to the batch's length; source_lengths[b] = m + 1, and "
                 "the positions from it on are masked wherever they are keys"},
                {"decoder_input", "start_id y₁ … y_n, padded with pad_id (teacher forcing; fairseq's convention)"},
                {"targets", "y₁ … y_n EOS, −1 on the padding (ignored by the loss)"},
                {"start_id", v.eos_id},
                {"pad_id", v.eos_id},
                {"target_pad", -1}};
  if (c.encoder())
    return Json{{"tokens",
                 "a window of train.seq_len tokens of the corpus; each position is chosen with probability "
                 "mask_prob and becomes mask_id 80% of the time, a random token 10%, and stays 10%"},
                {"targets", "the original token at the chosen positions, −1 elsewhere"},
                {"mask_prob", config.train.mask_prob}};
  return Json{{"tokens", "a window of train.seq_len tokens of the corpus (each line's pieces, then EOS; no BOS)"},
              {"targets", "the window shifted by one: the next token at every position"}};
}

// An export writes config.json and model.safetensors, names a run's folder holds too: into a run's folder it would
// replace the run's config.json, and the run could no longer resume.
void refuse_run_folder(const fs::path& run_dir, const fs::path& out_dir) {
  std::error_code ec;
  if (fs::equivalent(run_dir, out_dir, ec))
    fail(
        "--out {} is the run's own folder: the export would replace its config.json and the run could not resume; "
        "give another folder, e.g. --out exports/{}",
        out_dir.string(), fs::weakly_canonical(run_dir, ec).filename().string());
  if (fs::exists(out_dir / kCheckpointFile, ec))
    fail("--out {} holds a run ({}): the export would replace that run's config.json; give a new or empty folder",
         out_dir.string(), kCheckpointFile);
}

}  // namespace

Json export_config(const RunConfig& config, const Vocabulary& vocab, int step) {
  const model::ModelConfig& c = config.model;
  const model::Placement& placement = model::placement_of(c);
  const std::string qk = model::option(c, "qk_norm").get<std::string>();
  Json constants{
      {"norm_eps", c.norm.eps},
      {"embedding_scale", c.embed_scale == model::EmbedScale::sqrt_d ? Json(std::sqrt(static_cast<double>(c.d_model)))
                          : c.embed_scale == model::EmbedScale::learned ? Json("learned: <side>embed.scale [1]")
                                                                        : Json(1.0)},
      {"attention_scale", qk == "l2" ? Json("learned: <layer>.attn.qk_scale [1] (q and k L2-normalized per head)")
                                     : Json(1 / std::sqrt(static_cast<double>(c.head_dim())))},
  };
  if (placement.export_constants) constants.update(placement.export_constants(c));
  const int mask_id = c.encoder() ? c.mask_id() : -1;
  return Json{
      {"format", kExportFormat},
      {"step", step},
      {"model", model::to_json(c)},
      {"constants", constants},
      {"equations",
       {{"placement", placement.equations},
        {"placement_paper", placement.paper},
        {"ffn", activation_equation(c.activation)},
        {"positions", positions_equation(c)},
        {"logits", c.tied_embeddings ? "h · Eᵀ, E = embed.tokens.weight (tied)" : "h · lm_head.weightᵀ"},
        {"cross_attention", c.encoder_decoder() ? Json(cross_attention_equation(c)) : Json()}}},
      {"vocab",
       {{"size", c.vocab_size},
        {"tokenizer_size", vocab.tokenizer_size},
        {"mask_id", mask_id >= 0 ? Json(mask_id) : Json()},
        {"unk_id", vocab.unk_id},
        {"bos_id", vocab.bos_id >= 0 ? Json(vocab.bos_id) : Json()},
        {"eos_id", vocab.eos_id},
        {"tokenizer", "tokenizer.model (SentencePiece)"}}},
      {"batches", batches(config, vocab)},
      {"weights",
       {{"file", "model.safetensors"},
        {"names", "docs/model.md, Parameter names (linear weights [out, in], y = x Wᵀ + b)"}}},
  };
}

std::string export_checksum(std::span<const io::TensorToWrite> tensors) {
  std::vector<const io::TensorToWrite*> sorted;
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::uint32_t crc = 0;
  for (const io::TensorToWrite* t : sorted) crc = io::crc32(io::bytes_of(*t), crc);
  return fmt::format("{:08x}", crc);
}

ExportSummary export_run(const fs::path& run_dir, const fs::path& out_dir, const fs::path& data_dir) {
  const fs::path file = run_dir / kCheckpointFile;
  if (!fs::exists(file))
    fail("{} does not exist: export reads a trained run's checkpoint (normlab train --run {} first)", file.string(),
         run_dir.string());
  const CheckpointFile checkpoint = read_checkpoint(file);
  RunConfig config = checkpoint_config(checkpoint);
  const fs::path data = data_dir.empty() ? fs::path(config.data_dir) : data_dir;
  const fs::path tokenizer_file = data / "tokenizer.model";
  if (!fs::exists(tokenizer_file))
    fail(
        "{} does not exist: the export needs the run's tokenizer for its special ids; give the run's corpus with "
        "--data DIR (its data.dir is {})",
        tokenizer_file.string(), config.data_dir);
  const io::Tokenizer tokenizer = io::Tokenizer::load(tokenizer_file);
  const Vocabulary vocab{tokenizer.vocab_size(), tokenizer.unk_id(), tokenizer.bos_id(), tokenizer.eos_id()};

  std::vector<io::TensorToWrite> weights;
  ExportSummary summary{.out_dir = out_dir};
  for (const io::SafetensorsFile::Entry& e : checkpoint.file.entries()) {
    if (e.name.starts_with("optim.")) {
      ++summary.skipped;
      continue;
    }
    weights.push_back({e.name, e.dtype, e.shape, e.data.data()});
  }
  const io::SafetensorsFile::Entry& table = checkpoint.file.at("embed.tokens.weight");
  config.model.vocab_size = static_cast<int>(table.shape[0]);
  const int expected = vocab.tokenizer_size + (config.model.encoder() ? 1 : 0);
  if (config.model.vocab_size != expected)
    fail(
        "{} has {} pieces, so the model's vocabulary would be {}{}, but {} has {} rows: give the run's own corpus "
        "with --data DIR",
        tokenizer_file.string(), vocab.tokenizer_size, expected, config.model.encoder() ? " (with [MASK])" : "",
        file.string(), config.model.vocab_size);

  const auto step_entry = checkpoint.file.metadata().find("step");
  const std::string step_text = step_entry == checkpoint.file.metadata().end() ? "" : step_entry->second;
  if (step_text.empty() || step_text.size() > 9 || step_text.find_first_not_of("0123456789") != std::string::npos)
    fail("{}: metadata.step '{}' is not a step number; the checkpoint is corrupted", file.string(), step_text);
  const int step = std::stoi(step_text);
  summary.step = step;
  summary.tensors = weights.size();
  refuse_run_folder(run_dir, out_dir);
  // Held while writing: a folder that a trainer or a study is writing is refused, naming its process, and none can
  // start writing there until the export is done.
  const io::FolderLock lock(out_dir, "export folder");
  io::write_safetensors(out_dir / "model.safetensors", weights,
                        {{"format", kExportFormat}, {"data_crc32", export_checksum(weights)}});
  io::write_file_atomic(out_dir / "config.json", export_config(config, vocab, step).dump(2) + "\n");
  io::write_file_atomic(out_dir / "tokenizer.model", io::read_file(tokenizer_file, "tokenizer"));
  return summary;
}

}  // namespace normlab::train
