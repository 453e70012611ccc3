#pragma once
// normlab train --profile: where a training step's time goes. The graph times each op kind, forward and
// backward (engine/profile.h); the trainer times the phases around it. Shares are of the training loop's
// wall time, so what no phase claims (logging, the progress line) shows as "other".
#include <string>

#include "common/config_reader.h"
#include "engine/graph.h"
#include "engine/profile.h"

namespace normlab::train {

struct TrainProfile {
  engine::OpProfile ops;  // the training steps' forward and backward passes only
  double data_s = 0;      // batches from the loader into the model's inputs
  double grad_norm_s = 0, optimizer_s = 0, probes_s = 0, eval_s = 0, checkpoint_s = 0;
  double all_reduce_s = 0;  // data-parallel: the wait for the gradient sum after the backward pass (the rest of the
                            // sum overlaps the pass) and the loss sum
  double loop_s = 0;        // the whole training loop
  int first_step = 0, last_step = 0;

  Json to_json() const;
  // The table printed at the end of the run: phases by share, op kinds by time (forward / backward).
  std::string table() const;
};

// Adds the wall time of its scope to one phase of a profile; does nothing without a profile. A phase whose
// forward passes are its own (evaluation, probes) names the graph, whose op timing pauses for the scope.
class PhaseTimer {
 public:
  PhaseTimer(TrainProfile* profile, double TrainProfile::*phase, engine::Graph* own_passes = nullptr);
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  TrainProfile* profile_;
  double TrainProfile::*phase_;
  engine::Graph* paused_;
  double start_s_ = 0;
};

}  // namespace normlab::train
