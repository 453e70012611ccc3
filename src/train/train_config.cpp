#include "train/train_config.h"

namespace normlab::train {

RunConfig read_run_config(const Json& doc, const std::string& where) {
  RunConfig c;
  ConfigReader r(doc, where);
  const Json* m = r.raw("model");
  c.model = model::read_model_config(m ? *m : Json::object(), where + ": model");  // resolves defaults and switches
  if (c.model.encoder_decoder()) c.data_dir = "data/kjv-rv";  // the built-in parallel corpus (scripts/setup.sh)
  r.section("data", [&](ConfigReader& d) { d.read("dir", c.data_dir, {}); });
  r.section("train", [&](ConfigReader& t) {
    TrainConfig& x = c.train;
    t.read("batch_size", x.batch_size, 1, 1 << 16);
    t.read("seq_len", x.seq_len, 2, 1 << 16);
    t.read("steps", x.steps, 1, 1 << 30);
    t.read("grad_accum", x.grad_accum, 1, 1 << 16);
    t.read("lr", x.lr, 0.0, 100.0);
    t.read("schedule", x.schedule, {"constant", "cosine", "linear", "noam"});
    t.read("warmup", x.warmup, 0, 1 << 30);
    t.read("min_lr_ratio", x.min_lr_ratio, 0.0, 1.0);
    t.read("beta1", x.beta1, 0.0, 0.999999);
    t.read("beta2", x.beta2, 0.0, 0.999999999);
    t.read("adam_eps", x.adam_eps, 0.0, 1.0);
    t.read("weight_decay", x.weight_decay, 0.0, 10.0);
    t.read("clip", x.clip, 0.0, 1e9);
    t.read("eval_every", x.eval_every, 0, 1 << 30);
    t.read("eval_batches", x.eval_batches, 1, 1 << 20);
    t.read("checkpoint_every", x.checkpoint_every, 0, 1 << 30);
    t.read("log_every", x.log_every, 1, 1 << 30);
    t.read("seed", x.seed);
    t.read("threads", x.threads, 0, 1024);
    t.read("probe_every", x.probe_every, 0, 1 << 30);
    t.read("spike_z", x.spike_z, 0.0, 1e9);
    t.read("spike_skip", x.spike_skip);
    t.read("mask_prob", x.mask_prob, 0.0, 1.0);
    t.read("bleu_pairs", x.bleu_pairs, 0, 1 << 30);
    t.read("precision", x.precision, kPrecisions);
  });
  r.section("engine", [&](ConfigReader& e) {
    e.read("fuse", c.engine.fuse);
    e.read("recompute_attention", c.engine.recompute_attention);
  });
  r.finish();
  if (c.train.seq_len > c.model.max_seq_len)
    fail("{}: train.seq_len = {} exceeds model.max_seq_len = {}; raise max_seq_len or shorten seq_len", where,
         c.train.seq_len, c.model.max_seq_len);
  if (c.model.encoder() && c.train.mask_prob <= 0)
    fail(
        "{}: train.mask_prob = 0 masks nothing, so an encoder (model.shape = encoder) would learn nothing; use BERT's "
        "0.15",
        where);
  return c;
}

Json to_json(const RunConfig& c) {
  const TrainConfig& t = c.train;
  Json out{{"model", model::to_json(c.model)},
           {"data", {{"dir", c.data_dir}}},
           {"train",
            {{"batch_size", t.batch_size},
             {"seq_len", t.seq_len},
             {"steps", t.steps},
             {"grad_accum", t.grad_accum},
             {"lr", t.lr},
             {"schedule", t.schedule},
             {"warmup", t.warmup},
             {"min_lr_ratio", t.min_lr_ratio},
             {"beta1", t.beta1},
             {"beta2", t.beta2},
             {"adam_eps", t.adam_eps},
             {"weight_decay", t.weight_decay},
             {"clip", t.clip},
             {"eval_every", t.eval_every},
             {"eval_batches", t.eval_batches},
             {"checkpoint_every", t.checkpoint_every},
             {"log_every", t.log_every},
             {"seed", t.seed},
             {"threads", t.threads},
             {"probe_every", t.probe_every},
             {"spike_z", t.spike_z},
             {"spike_skip", t.spike_skip},
             {"mask_prob", t.mask_prob},
             {"precision", name_of(t.precision, kPrecisions)}}},
           {"engine", {{"fuse", c.engine.fuse}, {"recompute_attention", c.engine.recompute_attention}}}};
  if (c.model.encoder_decoder()) out["train"]["bleu_pairs"] = t.bleu_pairs;
  return out;
}

}  // namespace normlab::train
