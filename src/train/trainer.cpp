#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ostream>

#include "common/error.h"
#include "dist/comm.h"
#include "io/atomic_file.h"
#include "io/step_log.h"
#include "model/init.h"
#include "probe/guards.h"
#include "probe/training_probe.h"
#include "train/checkpoint.h"
#include "train/schedule.h"
#include "train/translation_eval.h"

namespace normlab::train {

namespace fs = std::filesystem;

namespace {

// How many rows of the logits have their target as the most likely token, and how many rows have a target.
std::pair<int64_t, int64_t> correct_predictions(const model::Model& m, const std::vector<int32_t>& targets) {
  const int64_t vocab = m.config.vocab_size;
  int64_t correct = 0, counted = 0;
  engine::dispatch_float(m.graph.float_type(), [&]<typename T>() {
    const T* logits = m.graph.data<T>(m.logits);
    for (size_t r = 0; r < targets.size(); ++r) {
      if (targets[r] < 0) continue;
      const T* row = logits + static_cast<int64_t>(r) * vocab;
      ++counted;
      correct += std::max_element(row, row + vocab) - row == targets[r];
    }
  });
  return {correct, counted};
}

}  // namespace

Evaluation evaluate(model::Model& m, const Loader& loader, int batches, const std::function<void(int64_t)>& done) {
  if (batches < 1) fail("the number of evaluation batches must be at least 1, got {}", batches);
  Batch batch;
  Evaluation total;
  for (int i = 0; i < batches; ++i) {
    loader.eval_batch(i, batches, batch);
    feed(m, batch);
    total.loss += batch.weight * m.forward(false);
    const auto [correct, counted] = correct_predictions(m, batch.targets);
    if (counted) total.accuracy += batch.weight * double(correct) / double(counted);
    if (done) done(i + 1);
  }
  return {total.loss / batches, total.accuracy / batches};
}

namespace {

bool is_train_record(const io::StepLine& line) {
  return line.record.is_object() && line.record.value(field::type, "") == record_type::train;
}

// metrics.jsonl as a resume finds it, cut back to the checkpoint's `step` (the run logs again what came after): its
// steps must not go back, and every train record up to `step` must be there: each multiple of train.log_every, and
// the last step's when the run has trained them all (its summary is made from it).
void keep_metrics_up_to(const fs::path& file, int step, const TrainConfig& t) {
  io::StepLog log = io::read_step_log(file, io::StepLogFormat::jsonl);
  std::vector<int> logged;
  for (int s = t.log_every; s <= step; s += t.log_every) logged.push_back(s);
  if (step == t.steps && step % t.log_every != 0) logged.push_back(step);
  io::require_steps(log, file, logged, "train record", is_train_record);
  io::keep_steps_up_to(file, log, step);
}

}  // namespace

MemoryNeeds training_needs(const RunConfig& config, const fs::path& run_dir, const TrainOptions& options) {
  std::error_code missing;  // no checkpoint: the constructor says so
  const std::uintmax_t checkpoint = options.resume ? fs::file_size(run_dir / kCheckpointFile, missing) : 0;
  return {.optimizer = true, .probes = config.train.probe_every > 0, .checkpoint_file = missing ? 0 : checkpoint};
}

namespace {

// This process's rows of every batch: all of them, or under mpirun its rank's shard.
Shard rank_shard(const RunConfig& config) {
  const dist::World& world = dist::world();
  const int batch = config.train.batch_size;
  if (!world.distributed()) return {0, batch};
  if (batch < world.size())
    fail(
        "train.batch_size = {} cannot be split over {} processes (each needs at least one row): raise "
        "train.batch_size (and lower train.grad_accum to keep the tokens per step) or start fewer processes",
        batch, world.size());
  return shard_of(batch, world.rank(), world.size());
}

}  // namespace

namespace {
// train.precision as the engine runs it: bf16 where the CPU has bf16 hardware; elsewhere fp32, with a note.
engine::GemmPrecision gemm_precision_for(const TrainConfig& t, std::ostream* progress) {
  if (t.precision != Precision::bf16) return engine::GemmPrecision::fp32;
  if (engine::cpu_has_bf16()) return engine::GemmPrecision::bf16;
  if (progress)
    *progress << "note: train.precision = bf16, but this CPU has neither avx512_bf16 nor AMX (oneDNN would emulate "
                 "bf16, slower than fp32): running fp32\n";
  return engine::GemmPrecision::fp32;
}
}  // namespace

Trainer::Trainer(RunConfig config, fs::path run_dir, TrainOptions options)
    : run_(build_run(config, rank_shard(config).rows, training_needs(config, run_dir, options))),
      run_dir_(std::move(run_dir)),
      options_(options),
      precision_(gemm_precision_for(run_.config.train, options_.progress)),
      loss_spikes_(128, 20, run_.config.train.spike_z),
      grad_spikes_(128, 20, run_.config.train.spike_z) {
  run_.model->graph.set_seed(run_.config.train.seed);
  const dist::World& world = dist::world();
  if (world.distributed()) {  // the model holds this rank's rows; its loader draws them
    const TrainConfig& t = run_.config.train;
    const Shard shard = rank_shard(run_.config);
    run_.model->graph.set_batch_shard(shard.first_row, shard.rows);
    run_.loader = std::make_unique<Loader>(run_.data.train, run_.data.val, t.batch_size, t.seq_len, t.seed, shard,
                                           objective_of(run_.config, run_.data));
    writer_ = world.rank() == 0;
    if (!writer_) options_.progress = nullptr;
  }
  optimizer_ = std::make_unique<AdamW>(run_.model->graph);
  if (options_.profile) profile_ = std::make_unique<TrainProfile>();

  // One process writes a run folder: a second `normlab train` of it, or a rerun study's while an old one still
  // writes it, is refused here.
  if (writer_) lock_.emplace(run_dir_, "run folder");
  const fs::path checkpoint = run_dir_ / kCheckpointFile;
  if (!options_.resume && fs::exists(checkpoint))
    fail("{} already holds a checkpoint: pass --resume to continue that run, or choose another --run directory",
         run_dir_.string());
  if (options_.resume && !fs::exists(checkpoint))
    fail("cannot resume: {} has no {} (train without --resume to start a new run)", run_dir_.string(), kCheckpointFile);
  if (options_.resume && to_json(checkpoint_config(checkpoint)) != to_json(run_.config))
    fail(
        "cannot resume: {}/config.json differs from the config stored in its checkpoint; restore it (the checkpoint's "
        "copy is in checkpoint.json) or start a new run",
        run_dir_.string());
  world.barrier();  // every rank has checked the directory before rank 0 writes to it
  if (!writer_) return;
  fs::create_directories(run_dir_);
  io::write_file_atomic(run_dir_ / "config.json", to_json(run_.config).dump(2) + "\n");
}

Trainer::~Trainer() = default;

void Trainer::log_metrics(const Json& record) {
  if (!metrics_) return;  // not the writing rank
  metrics_->append(record.dump());
  metrics_->append("\n");
  metrics_->flush();
}

void Trainer::save(int step) {
  if (!writer_) return;
  save_checkpoint(run_dir_, *run_.model, *optimizer_, run_.config, step,
                  {{"loss_spikes", loss_spikes_.window()}, {"grad_spikes", grad_spikes_.window()}});
  saved_step_ = step;  // on disk from here on, whatever becomes of checkpoint.json
  save_checkpoint_summary(run_dir_, run_.config, step);
}

std::string Trainer::checkpoint_state() const {
  if (saved_step_ == 0) return fmt::format("no checkpoint was saved in {} yet", run_dir_.string());
  return fmt::format("the checkpoint of step {} in {} is intact", saved_step_, run_dir_.string());
}

void Trainer::progress_line(int step, double loss, double lr, double tokens_per_s, double eta_s) {
  if (!options_.progress) return;
  *options_.progress << fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.2e} | {:.0f} tok/s | ETA {:.0f}s\n", step,
                                    run_.config.train.steps, loss, lr, tokens_per_s, eta_s)
                     << std::flush;
}

void Trainer::stop_non_finite(int step, std::vector<std::pair<std::string, double>> values, bool before_update) {
  const std::string where = probe::first_nonfinite(run_.model->graph);
  const std::string layer = probe::location_of(where);
  std::string saved = checkpoint_state();
  if (before_update && step > 1 && probe::parameters_finite(run_.model->graph)) {  // the state after step − 1
    save(step - 1);
    saved =
        fmt::format("the last good state (step {}) is saved in {}", step - 1, (run_dir_ / kCheckpointFile).string());
  }
  std::string value_text;  // "loss nan, grad norm inf"
  for (const auto& [key, value] : values) {
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', ' ');
    value_text += fmt::format("{}{} {}", value_text.empty() ? "" : ", ", name, value);
  }
  log_metrics(NonFiniteRecord{
      .step = step, .first = where, .unigram_entropy_nats = run_.data.unigram_entropy_nats, .values = std::move(values)}
                  .to_json());
  dist::world().barrier();  // the other ranks end the job only once rank 0 has saved and logged
  fail(
      "non-finite {} at step {} ({}): first {} {}; {}. Lower train.lr, add warm-up, or turn on "
      "train.clip",
      before_update ? "values" : "validation loss", step, value_text, layer, where.empty() ? "(not found)" : where,
      saved);
}

void Trainer::evaluate_into_summary() {
  Evaluation e = evaluate(*run_.model, *run_.loader, run_.config.train.eval_batches);
  dist::world().sum(&e.loss, 1);
  dist::world().sum(&e.accuracy, 1);
  summary_.val_loss = e.loss, summary_.val_accuracy = e.accuracy;
}

void Trainer::write_profile(int last_step, double loop_s) {
  run_.model->graph.set_profile(nullptr);
  if (last_step < profile_->first_step || !writer_) return;  // no step ran, or not the writing rank
  profile_->last_step = last_step;
  profile_->loop_s = loop_s;
  io::write_file_atomic(run_dir_ / "profile.json", profile_->to_json().dump(2) + "\n");
  if (options_.progress) *options_.progress << profile_->table() << std::flush;
}

TrainSummary Trainer::run() {
  try {
    return train();
  } catch (const io::WriteError& e) {
    throw io::WriteError(fmt::format("{}; the run stopped and {}", e.what(), checkpoint_state()));
  }
}

TrainSummary Trainer::train() {
  const int start = resume_or_init();
  open_logs(start);
  const int last = last_step(start);
  summary_.unigram_entropy_nats = run_.data.unigram_entropy_nats;
  summary_.unigram_val_xent_nats = run_.data.unigram_val_xent_nats;
  if (profile_) {
    profile_->first_step = start + 1;
    run_.model->graph.set_profile(&profile_->ops);
  }
  if (dist::world().distributed()) final_gradients_ = run_.model->graph.final_gradients_from();
  begin_ = window_start_ = Clock::now();
  if (start >= run_.config.train.steps) summarize_from_log(start);
  for (int n = start + 1; n <= last; ++n) {
    Step s = step(n);
    after_backward(s);
    update(s);
    after_step(s, last);
  }
  return finish(last);
}

int Trainer::resume_or_init() {
  model::Model& m = *run_.model;
  if (!options_.resume) {
    Batch first;  // rules that profile a forward pass (Admin) see real text
    run_.loader->train_batch(1, 0, first);
    feed(m, first);
    model::initialize(m, run_.config.train.seed, first.tokens.data(), first.targets.data());
    // Rules that profile a forward pass saw this rank's rows: every rank starts from rank 0's weights.
    const std::span<std::byte> weights = m.graph.parameter_block();
    dist::world().broadcast(weights.data(), weights.size());
    return 0;
  }
  Json state;  // older checkpoints have none: their detectors start empty, as before
  const int start = saved_step_ = load_checkpoint(run_dir_ / kCheckpointFile, m, optimizer_.get(), &state);
  for (auto [key, detector] : {std::pair{"loss_spikes", &loss_spikes_}, {"grad_spikes", &grad_spikes_}})
    if (state.contains(key)) {
      if (!state[key].is_array() ||
          !std::all_of(state[key].begin(), state[key].end(), [](const Json& v) { return v.is_number(); }))
        fail("{}: metadata.trainer_state.{} is not a list of numbers; the checkpoint is corrupted",
             (run_dir_ / kCheckpointFile).string(), key);
      detector->restore(state[key].get<std::vector<double>>());
    }
  if (options_.progress) *options_.progress << fmt::format("resumed {} at step {}\n", run_dir_.string(), start);
  return start;
}

void Trainer::open_logs(int start) {
  const TrainConfig& t = run_.config.train;
  model::Model& m = *run_.model;
  const dist::World& world = dist::world();
  if (writer_) {
    const fs::path metrics_file = run_dir_ / "metrics.jsonl";
    if (options_.resume) {
      keep_metrics_up_to(metrics_file, start, t);
      probe::TrainingProbe::truncate(run_dir_, start, t.probe_every);
    }
    metrics_ = std::make_unique<io::LogFile>(metrics_file,
                                             options_.resume ? io::LogFile::Mode::append : io::LogFile::Mode::truncate);
  }
  if (options_.progress)
    *options_.progress << fmt::format("{} parameters; memory: estimated peak {} ({}){}\n", m.graph.parameter_count(),
                                      human_bytes(run_.memory.peak()), run_.memory.breakdown(),
                                      world.distributed() ? fmt::format(" per process; data-parallel over {} processes "
                                                                        "({} of {} rows each on rank 0)",
                                                                        world.size(), run_.loader->rows(), t.batch_size)
                                                          : std::string());
  if (t.probe_every > 0 && writer_) {
    probes_ = std::make_unique<probe::TrainingProbe>(m, run_dir_, options_.resume);
    Batch reference;
    run_.loader->eval_batch(0, 1, reference);
    probes_->set_reference(reference.tokens.data(), reference.targets.data(),
                           reference.source.empty() ? nullptr : reference.source.data(),
                           reference.source_lengths.empty() ? nullptr : reference.source_lengths.data());
  }
}

int Trainer::last_step(int start) const {
  const TrainConfig& t = run_.config.train;
  const int last = options_.stop_after >= 0 ? std::min(options_.stop_after, t.steps) : t.steps;
  // A run killed after its final checkpoint but before summary.json only lacks the summary.
  const bool unsummarized = start >= t.steps && !fs::exists(run_dir_ / "summary.json");
  if (start >= t.steps && !unsummarized)
    fail("{} already finished its {} steps; raise train.steps in a new run to train longer", run_dir_.string(),
         t.steps);
  if (last <= start && !unsummarized)
    fail("--stop-after {} is not after the checkpoint's step {}: give a later step", options_.stop_after, start);
  return last;
}

void Trainer::summarize_from_log(int start) {
  // The final step's train record is kept; evaluating the checkpoint again is exact.
  const io::StepLog log = io::read_step_log(run_dir_ / "metrics.jsonl", io::StepLogFormat::jsonl);
  const auto record = std::find_if(log.lines.rbegin(), log.lines.rend(), [&](const io::StepLine& l) {
    return l.step == run_.config.train.steps && is_train_record(l);
  });
  TrainRecord kept;
  if (record != log.lines.rend()) try {
      kept = TrainRecord::from_json(record->record);
    } catch (const RecordError&) {  // keep_metrics_up_to has read it: a wrong field is NaN as a missing one
    }
  last_loss_ = kept.loss;
  summary_.tokens_per_s = std::isnan(kept.tokens_per_s) ? 0.0 : kept.tokens_per_s;
  evaluate_into_summary();
  if (options_.progress)
    *options_.progress << fmt::format("step {} was the last: evaluated the checkpoint again for summary.json\n", start);
}

Trainer::Step Trainer::step(int n) {
  const TrainConfig& t = run_.config.train;
  model::Model& m = *run_.model;
  const dist::World& world = dist::world();
  TrainProfile* const profile = profile_.get();
  Step s{.step = n};
  m.graph.zero_param_grads();
  for (int micro = 0; micro < t.grad_accum; ++micro) {
    m.graph.set_step(static_cast<uint64_t>(n) * static_cast<uint64_t>(t.grad_accum) +
                     static_cast<uint64_t>(micro));  // dropout masks
    {
      PhaseTimer timer(profile, &TrainProfile::data_s);
      run_.loader->train_batch(n, micro, batch_);
      feed(m, batch_);
    }
    // This shard's term of the batch's mean loss (weight 1 in a single process).
    const double weight = batch_.weight / t.grad_accum;
    s.loss += weight * m.forward(true);
    if (world.distributed() && micro == t.grad_accum - 1) {
      // The last backward pass of the step: each tail of the gradients is summed over the ranks as soon as the
      // tape has no more writes to it, while the pass goes on (dist::OverlappedSum).
      const std::span<std::byte> grads = m.graph.gradient_block();
      engine::dispatch_float(m.graph.float_type(), [&]<typename T>() {
        dist::OverlappedSum sum(reinterpret_cast<T*>(grads.data()), grads.size() / sizeof(T));
        m.graph.backward(m.loss, weight, [&](size_t node) { sum.ready_from(final_gradients_[node] / sizeof(T)); });
        PhaseTimer timer(profile, &TrainProfile::all_reduce_s);
        sum.finish();
      });
    } else {
      m.graph.backward(m.loss, weight);
    }
  }
  if (world.distributed()) {
    PhaseTimer timer(profile, &TrainProfile::all_reduce_s);
    world.sum(&s.loss, 1);
  }
  {
    PhaseTimer timer(profile, &TrainProfile::grad_norm_s);
    s.grad_norm = global_grad_norm(m.graph);
  }
  if (!std::isfinite(s.loss) || !std::isfinite(s.grad_norm))
    stop_non_finite(n, {{field::loss, s.loss}, {field::grad_norm, s.grad_norm}}, true);
  s.lr = learning_rate(t, n);
  return s;
}

void Trainer::after_backward(Step& s) {
  const TrainConfig& t = run_.config.train;
  const double loss_z = loss_spikes_.observe(s.loss), grad_z = grad_spikes_.observe(s.grad_norm);
  s.spike = loss_spikes_.is_spike(loss_z) || grad_spikes_.is_spike(grad_z);
  if (s.spike) {
    log_metrics(SpikeRecord{.step = s.step,
                            .loss = s.loss,
                            .loss_z = loss_z,
                            .grad_norm = s.grad_norm,
                            .grad_norm_z = grad_z,
                            .update_skipped = t.spike_skip}
                    .to_json());
    if (options_.progress)
      *options_.progress << fmt::format("step {:>6} | spike: loss z {:.1f}, grad-norm z {:.1f}{}\n", s.step, loss_z,
                                        grad_z, t.spike_skip ? " (update skipped)" : "");
  }
  s.probing = probes_ && (s.step == 1 || s.step % t.probe_every == 0);  // step 1: the state at init
  if (s.probing) {
    PhaseTimer timer(profile_.get(), &TrainProfile::probes_s, &run_.model->graph);
    probes_->after_backward(s.step, s.loss, s.grad_norm);
  }
}

void Trainer::update(const Step& s) {
  const TrainConfig& t = run_.config.train;
  if (s.spike && t.spike_skip) return;
  PhaseTimer timer(profile_.get(), &TrainProfile::optimizer_s);
  const double clip_scale = t.clip > 0 && s.grad_norm > t.clip ? t.clip / s.grad_norm : 1.0;
  optimizer_->step({s.lr, t.beta1, t.beta2, t.adam_eps, t.weight_decay}, clip_scale, s.step);
}

void Trainer::after_step(const Step& s, int last) {
  const TrainConfig& t = run_.config.train;
  TrainProfile* const profile = profile_.get();
  if (s.probing) {
    PhaseTimer timer(profile, &TrainProfile::probes_s, &run_.model->graph);
    probes_->after_update(s.step);
  }
  last_loss_ = s.loss;
  ++window_steps_;
  if (s.step % t.log_every == 0 || s.step == last) {
    const double tokens_per_step = double(t.batch_size) * t.seq_len * t.grad_accum;
    const double window = std::chrono::duration<double>(Clock::now() - window_start_).count();
    const double tps = window_steps_ * tokens_per_step / std::max(window, 1e-9);
    log_metrics(TrainRecord{.step = s.step,
                            .loss = s.loss,
                            .lr = s.lr,
                            .grad_norm = s.grad_norm,
                            .tokens_per_s = tps,
                            .elapsed_s = std::chrono::duration<double>(Clock::now() - begin_).count()}
                    .to_json());
    progress_line(s.step, s.loss, s.lr, tps, (last - s.step) * tokens_per_step / std::max(tps, 1e-9));
    summary_.tokens_per_s = tps;
    window_start_ = Clock::now();
    window_steps_ = 0;
  }
  if ((t.eval_every > 0 && s.step % t.eval_every == 0) || s.step == t.steps) {
    {
      PhaseTimer timer(profile, &TrainProfile::eval_s, &run_.model->graph);
      evaluate_into_summary();
    }
    if (!std::isfinite(summary_.val_loss)) stop_non_finite(s.step, {{field::val_loss, summary_.val_loss}}, false);
    log_metrics(
        EvalRecord{.step = s.step, .val_loss = summary_.val_loss, .val_accuracy = summary_.val_accuracy}.to_json());
    if (options_.progress)
      *options_.progress << fmt::format("step {:>6} | {} {:.4f} | {} {:.3f}\n", s.step, field::val_loss,
                                        summary_.val_loss, field::val_accuracy, summary_.val_accuracy);
  }
  if ((t.checkpoint_every > 0 && s.step % t.checkpoint_every == 0) || s.step == last) {
    PhaseTimer timer(profile, &TrainProfile::checkpoint_s);
    save(s.step);
  }
}

TrainSummary Trainer::finish(int last) {
  const TrainConfig& t = run_.config.train;
  model::Model& m = *run_.model;
  if (profile_) write_profile(last, std::chrono::duration<double>(Clock::now() - begin_).count());
  summary_.steps = last;
  const Precision ran = m.graph.float_type() == engine::DType::f64                ? Precision::fp64
                        : engine::gemm_precision() == engine::GemmPrecision::bf16 ? Precision::bf16
                                                                                  : Precision::fp32;
  summary_.precision = std::string(name_of(ran, kPrecisions));
  summary_.train_loss = last_loss_;
  summary_.seconds = std::chrono::duration<double>(Clock::now() - begin_).count();
  summary_.parameters = static_cast<int64_t>(m.graph.parameter_count());
  if (last == t.steps && writer_ && m.config.encoder_decoder() && t.bleu_pairs > 0) {
    const TranslationScore score =
        score_translations(m, *run_.loader, run_.data.tokenizer_path, run_.data.eos_id, t.bleu_pairs);
    summary_.bleu = score.bleu.score, summary_.chrf = score.chrf.score, summary_.bleu_pairs = t.bleu_pairs;
    if (options_.progress)
      *options_.progress << fmt::format("BLEU {:.2f}, chrF {:.2f} on {} validation pairs (greedy, {:.1f} s)\n",
                                        summary_.bleu, summary_.chrf, score.translations.size(), score.seconds);
  }
  if (last == t.steps && writer_) io::write_file_atomic(run_dir_ / "summary.json", summary_.to_json().dump(2) + "\n");
  if (metrics_) metrics_->close();
  if (probes_) probes_->close();
  return summary_;
}

}  // namespace normlab::train
