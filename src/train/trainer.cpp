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
using Clock = std::chrono::steady_clock;

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

Evaluation evaluate(model::Model& m, const Loader& loader, int batches) {
  if (batches < 1) fail("the number of evaluation batches must be at least 1, got {}", batches);
  Batch batch;
  Evaluation total;
  for (int i = 0; i < batches; ++i) {
    loader.eval_batch(i, batches, batch);
    feed(m, batch);
    total.loss += batch.weight * m.forward(false);
    const auto [correct, counted] = correct_predictions(m, batch.targets);
    if (counted) total.accuracy += batch.weight * double(correct) / double(counted);
  }
  return {total.loss / batches, total.accuracy / batches};
}

namespace {

bool is_train_record(const io::StepLine& line) {
  return line.record.contains("type") && line.record["type"] == "train";
}

// metrics.jsonl as a resume finds it, cut back to the checkpoint's `step` (the run logs again what came after): its
// steps must not go back, and every train record up to `step` must be there: each multiple of train.log_every, and
// the last step's when the run has trained them all (its summary is made from it).
io::StepLog keep_metrics_up_to(const fs::path& file, int step, const TrainConfig& t) {
  io::StepLog log = io::read_step_log(file, io::StepLogFormat::jsonl);
  std::vector<int> logged;
  for (int s = t.log_every; s <= step; s += t.log_every) logged.push_back(s);
  if (step == t.steps && step % t.log_every != 0) logged.push_back(step);
  io::require_steps(log, file, logged, "train record", is_train_record);
  io::keep_steps_up_to(file, log, step);
  return log;
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
  if (t.precision != "bf16") return engine::GemmPrecision::fp32;
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

void Trainer::stop_non_finite(int step, std::initializer_list<std::pair<const char*, double>> values,
                              bool before_update) {
  const std::string where = probe::first_nonfinite(run_.model->graph);
  const std::string layer = probe::location_of(where);
  std::string saved = checkpoint_state();
  if (before_update && step > 1 && probe::parameters_finite(run_.model->graph)) {  // the state after step − 1
    save(step - 1);
    saved =
        fmt::format("the last good state (step {}) is saved in {}", step - 1, (run_dir_ / kCheckpointFile).string());
  }
  // The corpus's unigram entropy, the stand-in for a diverged run's loss in the studies (it learned no more).
  Json record{{"type", "non_finite"},
              {"step", step},
              {"first", where},
              {"unigram_entropy_nats", run_.data.unigram_entropy_nats}};
  std::string value_text;  // "loss nan, grad norm inf"
  for (const auto& [key, value] : values) {
    record[key] = value;
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', ' ');
    value_text += fmt::format("{}{} {}", value_text.empty() ? "" : ", ", name, value);
  }
  log_metrics(record);
  dist::world().barrier();  // the other ranks end the job only once rank 0 has saved and logged
  fail(
      "non-finite {} at step {} ({}): first {} {}; {}. Lower train.lr, add warm-up, or turn on "
      "train.clip",
      before_update ? "values" : "validation loss", step, value_text, layer, where.empty() ? "(not found)" : where,
      saved);
}

void Trainer::evaluate_into(TrainSummary& summary) {
  Evaluation e = evaluate(*run_.model, *run_.loader, run_.config.train.eval_batches);
  dist::world().sum(&e.loss, 1);
  dist::world().sum(&e.accuracy, 1);
  summary.val_loss = e.loss, summary.val_accuracy = e.accuracy;
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
  const TrainConfig& t = run_.config.train;
  model::Model& m = *run_.model;
  const dist::World& world = dist::world();
  int start = 0;
  const fs::path metrics_file = run_dir_ / "metrics.jsonl";
  io::StepLog metrics_log;  // what a resume kept of metrics.jsonl (on the writing rank)
  if (options_.resume) {
    Json state;  // older checkpoints have none: their detectors start empty, as before
    start = saved_step_ = load_checkpoint(run_dir_ / kCheckpointFile, m, optimizer_.get(), &state);
    for (auto [key, detector] : {std::pair{"loss_spikes", &loss_spikes_}, {"grad_spikes", &grad_spikes_}})
      if (state.contains(key)) {
        if (!state[key].is_array() ||
            !std::all_of(state[key].begin(), state[key].end(), [](const Json& v) { return v.is_number(); }))
          fail("{}: metadata.trainer_state.{} is not a list of numbers; the checkpoint is corrupted",
               (run_dir_ / kCheckpointFile).string(), key);
        detector->restore(state[key].get<std::vector<double>>());
      }
    if (writer_) {
      metrics_log = keep_metrics_up_to(metrics_file, start, t);
      probe::TrainingProbe::truncate(run_dir_, start, t.probe_every);
    }
    if (options_.progress) *options_.progress << fmt::format("resumed {} at step {}\n", run_dir_.string(), start);
  } else {
    Batch first;  // rules that profile a forward pass (Admin) see real text
    run_.loader->train_batch(1, 0, first);
    feed(m, first);
    model::initialize(m, t.seed, first.tokens.data(), first.targets.data());
    // Rules that profile a forward pass saw this rank's rows: every rank starts from rank 0's weights.
    const std::span<std::byte> weights = m.graph.parameter_block();
    world.broadcast(weights.data(), weights.size());
  }
  if (writer_)
    metrics_ = std::make_unique<io::LogFile>(metrics_file,
                                             options_.resume ? io::LogFile::Mode::append : io::LogFile::Mode::truncate);

  if (options_.progress)
    *options_.progress << fmt::format("{} parameters; memory: estimated peak {} ({}){}\n", m.graph.parameter_count(),
                                      human_bytes(run_.memory.peak()), run_.memory.breakdown(),
                                      world.distributed() ? fmt::format(" per process; data-parallel over {} processes "
                                                                        "({} of {} rows each on rank 0)",
                                                                        world.size(), run_.loader->rows(), t.batch_size)
                                                          : std::string());
  std::unique_ptr<probe::TrainingProbe> probes;
  if (t.probe_every > 0 && writer_) {
    probes = std::make_unique<probe::TrainingProbe>(m, run_dir_, options_.resume);
    Batch reference;
    run_.loader->eval_batch(0, 1, reference);
    probes->set_reference(reference.tokens.data(), reference.targets.data(),
                          reference.source.empty() ? nullptr : reference.source.data(),
                          reference.source_lengths.empty() ? nullptr : reference.source_lengths.data());
  }

  const int last = options_.stop_after >= 0 ? std::min(options_.stop_after, t.steps) : t.steps;
  // A run killed after its final checkpoint but before summary.json only lacks the summary.
  const bool unsummarized = start >= t.steps && !fs::exists(run_dir_ / "summary.json");
  if (start >= t.steps && !unsummarized)
    fail("{} already finished its {} steps; raise train.steps in a new run to train longer", run_dir_.string(),
         t.steps);
  if (last <= start && !unsummarized)
    fail("--stop-after {} is not after the checkpoint's step {}: give a later step", options_.stop_after, start);
  const double tokens_per_step = double(t.batch_size) * t.seq_len * t.grad_accum;
  TrainSummary summary;
  summary.unigram_entropy = run_.data.unigram_entropy_nats;
  summary.unigram_val_xent = run_.data.unigram_val_xent_nats;
  Batch batch;
  TrainProfile* const profile = profile_.get();
  if (profile) {
    profile->first_step = start + 1;
    m.graph.set_profile(&profile->ops);
  }
  const std::vector<size_t> final_gradients =
      world.distributed() ? m.graph.final_gradients_from() : std::vector<size_t>{};
  const auto begin = Clock::now();
  auto window_start = begin;
  int window_steps = 0;
  double loss = 0;
  if (unsummarized) {  // the final step's train record is kept; evaluating the checkpoint again is exact
    const auto last_record =
        std::find_if(metrics_log.lines.rbegin(), metrics_log.lines.rend(),
                     [&](const io::StepLine& l) { return l.step == t.steps && is_train_record(l); });
    const Json record = last_record == metrics_log.lines.rend() ? Json::object() : last_record->record;
    const auto number = [&](const char* key, double fallback) {
      return record.contains(key) && record[key].is_number() ? record[key].get<double>() : fallback;
    };
    loss = number("loss", NAN);
    summary.tokens_per_second = number("tokens_per_s", 0.0);
    evaluate_into(summary);
    if (options_.progress)
      *options_.progress << fmt::format("step {} was the last: evaluated the checkpoint again for summary.json\n",
                                        start);
  }
  for (int step = start + 1; step <= last; ++step) {
    m.graph.zero_param_grads();
    loss = 0;
    for (int micro = 0; micro < t.grad_accum; ++micro) {
      m.graph.set_step(static_cast<uint64_t>(step) * static_cast<uint64_t>(t.grad_accum) +
                       static_cast<uint64_t>(micro));  // dropout masks
      {
        PhaseTimer timer(profile, &TrainProfile::data_s);
        run_.loader->train_batch(step, micro, batch);
        feed(m, batch);
      }
      // This shard's term of the batch's mean loss (weight 1 in a single process).
      const double weight = batch.weight / t.grad_accum;
      loss += weight * m.forward(true);
      if (world.distributed() && micro == t.grad_accum - 1) {
        // The last backward pass of the step: each tail of the gradients is summed over the ranks as soon as the
        // tape has no more writes to it, while the pass goes on (dist::OverlappedSum).
        const std::span<std::byte> grads = m.graph.gradient_block();
        engine::dispatch_float(m.graph.float_type(), [&]<typename T>() {
          dist::OverlappedSum sum(reinterpret_cast<T*>(grads.data()), grads.size() / sizeof(T));
          m.graph.backward(m.loss, weight, [&](size_t node) { sum.ready_from(final_gradients[node] / sizeof(T)); });
          PhaseTimer timer(profile, &TrainProfile::all_reduce_s);
          sum.finish();
        });
      } else {
        m.graph.backward(m.loss, weight);
      }
    }
    if (world.distributed()) {
      PhaseTimer timer(profile, &TrainProfile::all_reduce_s);
      world.sum(&loss, 1);
    }
    double grad_norm = 0;
    {
      PhaseTimer timer(profile, &TrainProfile::grad_norm_s);
      grad_norm = global_grad_norm(m.graph);
    }
    if (!std::isfinite(loss) || !std::isfinite(grad_norm))
      stop_non_finite(step, {{"loss", loss}, {"grad_norm", grad_norm}}, true);
    const double lr = learning_rate(t, step);
    const double loss_z = loss_spikes_.observe(loss), grad_z = grad_spikes_.observe(grad_norm);
    const bool spike = loss_spikes_.is_spike(loss_z) || grad_spikes_.is_spike(grad_z);
    if (spike) {
      const bool skipped = t.spike_skip;
      log_metrics({{"type", "spike"},
                   {"step", step},
                   {"loss", loss},
                   {"loss_z", loss_z},
                   {"grad_norm", grad_norm},
                   {"grad_norm_z", grad_z},
                   {"update_skipped", skipped}});
      if (options_.progress)
        *options_.progress << fmt::format("step {:>6} | spike: loss z {:.1f}, grad-norm z {:.1f}{}\n", step, loss_z,
                                          grad_z, skipped ? " (update skipped)" : "");
    }
    const bool probing = probes && (step == 1 || step % t.probe_every == 0);  // step 1: the state at init
    if (probing) {
      PhaseTimer timer(profile, &TrainProfile::probes_s, &m.graph);
      probes->after_backward(step, loss, grad_norm);
    }
    if (!(spike && t.spike_skip)) {
      PhaseTimer timer(profile, &TrainProfile::optimizer_s);
      const double clip_scale = t.clip > 0 && grad_norm > t.clip ? t.clip / grad_norm : 1.0;
      optimizer_->step({lr, t.beta1, t.beta2, t.adam_eps, t.weight_decay}, clip_scale, step);
    }
    if (probing) {
      PhaseTimer timer(profile, &TrainProfile::probes_s, &m.graph);
      probes->after_update(step);
    }
    ++window_steps;

    if (step % t.log_every == 0 || step == last) {
      const double window = std::chrono::duration<double>(Clock::now() - window_start).count();
      const double tps = window_steps * tokens_per_step / std::max(window, 1e-9);
      const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
      log_metrics({{"type", "train"},
                   {"step", step},
                   {"loss", loss},
                   {"lr", lr},
                   {"grad_norm", grad_norm},
                   {"tokens_per_s", tps},
                   {"elapsed_s", elapsed}});
      progress_line(step, loss, lr, tps, (last - step) * tokens_per_step / std::max(tps, 1e-9));
      summary.tokens_per_second = tps;
      window_start = Clock::now();
      window_steps = 0;
    }
    const bool final_step = step == t.steps;
    if ((t.eval_every > 0 && step % t.eval_every == 0) || final_step) {
      {
        PhaseTimer timer(profile, &TrainProfile::eval_s, &m.graph);
        evaluate_into(summary);
      }
      if (!std::isfinite(summary.val_loss)) stop_non_finite(step, {{"val_loss", summary.val_loss}}, false);
      log_metrics(
          {{"type", "eval"}, {"step", step}, {"val_loss", summary.val_loss}, {"val_accuracy", summary.val_accuracy}});
      if (options_.progress)
        *options_.progress << fmt::format("step {:>6} | val_loss {:.4f} | val_accuracy {:.3f}\n", step,
                                          summary.val_loss, summary.val_accuracy);
    }
    if ((t.checkpoint_every > 0 && step % t.checkpoint_every == 0) || step == last) {
      PhaseTimer timer(profile, &TrainProfile::checkpoint_s);
      save(step);
    }
  }
  if (profile) write_profile(last, std::chrono::duration<double>(Clock::now() - begin).count());
  summary.steps = last;
  summary.precision = m.graph.float_type() == engine::DType::f64                ? "fp64"
                      : engine::gemm_precision() == engine::GemmPrecision::bf16 ? "bf16"
                                                                                : "fp32";
  summary.train_loss = loss;
  summary.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  if (last == t.steps && writer_ && m.config.encoder_decoder() && t.bleu_pairs > 0) {
    const TranslationScore score =
        score_translations(m, *run_.loader, run_.data.tokenizer_path, run_.data.eos_id, t.bleu_pairs);
    summary.bleu = score.bleu.score, summary.chrf = score.chrf.score;
    if (options_.progress)
      *options_.progress << fmt::format("BLEU {:.2f}, chrF {:.2f} on {} validation pairs (greedy, {:.1f} s)\n",
                                        summary.bleu, summary.chrf, score.translations.size(), score.seconds);
  }
  if (last == t.steps && writer_) {
    Json s{{"steps", summary.steps},
           {"train_loss", summary.train_loss},
           {"val_loss", summary.val_loss},
           {"val_accuracy", summary.val_accuracy},
           {"unigram_entropy_nats", summary.unigram_entropy},
           {"seconds", summary.seconds},
           {"tokens_per_s", summary.tokens_per_second},
           {"parameters", m.graph.parameter_count()},
           {"precision", summary.precision}};
    if (std::isfinite(summary.bleu)) {
      s["bleu"] = summary.bleu, s["chrf"] = summary.chrf, s["bleu_pairs"] = t.bleu_pairs;
      s["bleu_decoding"] = "greedy";
    }
    io::write_file_atomic(run_dir_ / "summary.json", s.dump(2) + "\n");
  }
  if (metrics_) metrics_->close();
  if (probes) probes->close();
  return summary;
}

}  // namespace normlab::train
