#include "train/run.h"

#include "common/error.h"
#include "engine/ops.h"
#include "engine/parallel.h"
#include "model/weights.h"
#include "train/checkpoint.h"

namespace normlab::train {

Objective objective_of(const RunConfig& config, const io::TokenData& data) {
  if (config.model.encoder_decoder()) return {.pairs = true, .eos_id = data.eos_id};
  if (!config.model.encoder()) return {};
  return {config.train.mask_prob, config.model.mask_id(), config.model.mask_id()};
}

void feed(model::Model& m, const Batch& batch) {
  if (m.config.encoder_decoder()) m.set_source(batch.source.data(), batch.source_lengths.data());
  m.set_batch(batch.tokens.data(), batch.targets.data());
}

Run plan_run(RunConfig config, int batch, const MemoryNeeds& needs, bool loader, const io::SafetensorsFile* weights) {
  engine::set_threads(config.train.threads);
  Run run;
  run.data = io::load_tokens(config.data_dir);
  if (run.data.pairs && !config.model.encoder_decoder())
    fail(
        "{} holds sentence pairs (a translation corpus): set model.shape = 'encoder_decoder' to train on it, or point "
        "data_dir at a text corpus",
        config.data_dir);
  if (!run.data.pairs && config.model.encoder_decoder())
    fail(
        "model.shape = 'encoder_decoder' trains on sentence pairs, but {} holds running text: prepare a parallel "
        "corpus with normlab prepare --pairs (scripts/get-bible-pairs.sh) and set data_dir",
        config.data_dir);
  const int mask = config.model.encoder() ? 1 : 0;  // an encoder's [MASK] follows the tokenizer's ids
  if (config.model.vocab_size == 0) config.model.vocab_size = run.data.vocab_size + mask;
  if (config.model.vocab_size != run.data.vocab_size + mask)
    fail(
        "model.vocab_size = {} but the token data in {} has a vocabulary of {}{}: remove model.vocab_size or re-run "
        "normlab prepare with --vocab-size {}",
        config.model.vocab_size, config.data_dir, run.data.vocab_size,
        mask ? " (an encoder adds [MASK]: it needs one more)" : "", config.model.vocab_size - mask);
  const TrainConfig& t = config.train;
  if (batch == 0) batch = t.batch_size;
  const engine::DType dtype = t.precision == Precision::fp64 ? engine::DType::f64 : engine::DType::f32;
  run.model = model::build_unplanned_model(config.model, batch, t.seq_len, dtype);
  run.model->graph.set_fusion(config.engine.fuse);
  run.model->graph.set_gradients(needs.gradients);
  if (weights) model::keep_bf16_weights(*run.model, *weights);
  if (config.engine.recompute_attention) engine::recompute_attention_probabilities(run.model->graph);
  run.memory = estimate_memory(*run.model, needs);
  if (loader)
    run.loader = std::make_unique<Loader>(run.data.train, run.data.val, batch, t.seq_len, t.seed, Shard{},
                                          objective_of(config, run.data));
  run.config = std::move(config);
  return run;
}

Run build_run(RunConfig config, int batch, const MemoryNeeds& needs, bool loader, const io::SafetensorsFile* weights) {
  Run run = plan_run(std::move(config), batch, needs, loader, weights);
  check_memory(run.memory, available_memory());
  run.model->graph.plan();
  run.model->reset_source();
  return run;
}

Run open_run(const std::filesystem::path& run_dir, int batch, MemoryNeeds needs, bool loader) {
  const std::filesystem::path file = run_dir / kCheckpointFile;
  // First: it says so when the checkpoint is missing or damaged. Read once, for the config and the weights.
  const CheckpointFile checkpoint = read_checkpoint(file);
  needs.checkpoint_file = std::filesystem::file_size(file);
  Run run = build_run(checkpoint_config(checkpoint), batch, needs, loader, &checkpoint.file);
  run.step = load_checkpoint(checkpoint, *run.model, nullptr);
  return run;
}

}  // namespace normlab::train
