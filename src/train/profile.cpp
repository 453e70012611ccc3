#include "train/profile.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include <fmt/core.h>

namespace normlab::train {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Phase {
  const char* key;    // in profile.json
  const char* label;  // in the table
  double seconds;
};

std::vector<Phase> phases(const TrainProfile& p) {
  std::vector<Phase> out{{"forward_backward", "forward + backward", p.ops.total_s()},
                         {"optimizer", "AdamW", p.optimizer_s},
                         {"grad_norm", "gradient norm", p.grad_norm_s},
                         {"all_reduce", "all-reduce (MPI)", p.all_reduce_s},
                         {"data", "data", p.data_s},
                         {"eval", "evaluation", p.eval_s},
                         {"probes", "probes", p.probes_s},
                         {"checkpoints", "checkpoints", p.checkpoint_s}};
  const double claimed =
      std::accumulate(out.begin(), out.end(), 0.0, [](double s, const Phase& x) { return s + x.seconds; });
  out.push_back({"other", "other (logging, loop)", std::max(0.0, p.loop_s - claimed)});
  return out;
}

// The op kinds that ran, slowest first.
std::vector<size_t> kinds_by_time(const engine::OpProfile& ops) {
  std::vector<size_t> kinds;
  for (size_t k = 0; k < engine::OpProfile::kKinds; ++k)
    if (ops.forward_calls[k] + ops.backward_calls[k] > 0) kinds.push_back(k);
  std::stable_sort(kinds.begin(), kinds.end(), [&](size_t a, size_t b) {
    return ops.forward_s[a] + ops.backward_s[a] > ops.forward_s[b] + ops.backward_s[b];
  });
  return kinds;
}

const char* op_name(size_t kind) { return engine::op_def(static_cast<engine::OpKind>(kind)).name; }

}  // namespace

Json TrainProfile::to_json() const {
  const int steps = last_step - first_step + 1;
  Json out{{"first_step", first_step},
           {"last_step", last_step},
           {"loop_s", loop_s},
           {"ms_per_step", steps > 0 ? 1e3 * loop_s / steps : 0.0}};
  Json phase_seconds = Json::object();
  for (const Phase& p : phases(*this)) phase_seconds[p.key] = p.seconds;
  out["phases_s"] = phase_seconds;
  Json kinds = Json::array();
  for (size_t k : kinds_by_time(ops))
    kinds.push_back({{"op", op_name(k)},
                     {"forward_s", ops.forward_s[k]},
                     {"backward_s", ops.backward_s[k]},
                     {"forward_calls", ops.forward_calls[k]},
                     {"backward_calls", ops.backward_calls[k]}});
  out["ops"] = kinds;
  return out;
}

std::string TrainProfile::table() const {
  const int steps = std::max(1, last_step - first_step + 1);
  const double total = std::max(loop_s, 1e-12);
  std::string out = fmt::format("profile of steps {}-{}: {:.2f} s in the training loop, {:.1f} ms per step\n",
                                first_step, last_step, loop_s, 1e3 * loop_s / steps);
  out += fmt::format("  {:<22} {:>9} {:>7}\n", "phase", "seconds", "share");
  for (const Phase& p : phases(*this))
    out += fmt::format("  {:<22} {:>9.3f} {:>6.1f}%\n", p.label, p.seconds, 100 * p.seconds / total);
  out +=
      fmt::format("  {:<22} {:>9} {:>9} {:>7} {:>11}\n", "op kind", "forward s", "backward s", "share", "calls/step");
  for (size_t k : kinds_by_time(ops))
    out +=
        fmt::format("  {:<22} {:>9.3f} {:>9.3f} {:>6.1f}% {:>11.1f}\n", op_name(k), ops.forward_s[k], ops.backward_s[k],
                    100 * (ops.forward_s[k] + ops.backward_s[k]) / total, double(ops.forward_calls[k]) / steps);
  return out;
}

PhaseTimer::PhaseTimer(TrainProfile* profile, double TrainProfile::*phase, engine::Graph* own_passes)
    : profile_(profile), phase_(phase), paused_(profile ? own_passes : nullptr) {
  if (!profile_) return;
  if (paused_) paused_->set_profile(nullptr);
  start_s_ = now_s();
}

PhaseTimer::~PhaseTimer() {
  if (!profile_) return;
  profile_->*phase_ += now_s() - start_s_;
  if (paused_) paused_->set_profile(&profile_->ops);
}

}  // namespace normlab::train
