#pragma once
// Training guards: where a non-finite value first appeared, and loss / grad-norm spikes by running
// z-score over a window (as llm.c's outlier detector and OLMo-core's spike score do).
#include <deque>
#include <string>
#include <vector>

#include "engine/graph.h"

namespace normlab::probe {

// The first non-finite tensor in the order the step computed them: activations along the tape, then
// gradients back along it, then parameter gradients. Empty if everything is finite.
std::string first_nonfinite(const engine::Graph& g);
// Where a tensor (a name as first_nonfinite returns it) sits in the model, for messages: "in layer 3",
// "before the first layer" (embeddings), "in the layer combination" (DLCL), "after the last layer"
// (final norm, ResiDual's output, head, logits, loss).
std::string location_of(const std::string& tensor);
bool parameters_finite(const engine::Graph& g);

class SpikeDetector {
 public:
  SpikeDetector(int window, int warmup, double threshold) : window_(window), warmup_(warmup), threshold_(threshold) {}
  // The z-score of x against the window so far (0 until `warmup` values are in); x joins the window
  // unless it is a spike, so one spike does not hide the next.
  double observe(double x);
  bool is_spike(double z) const { return threshold_ > 0 && z > threshold_; }
  // The window, to store in a checkpoint and restore on resume: a resumed run then flags exactly the
  // spikes the uninterrupted run flags (and skips the same updates under train.spike_skip).
  std::vector<double> window() const { return {values_.begin(), values_.end()}; }
  void restore(const std::vector<double>& window) { values_.assign(window.begin(), window.end()); }

 private:
  int window_, warmup_;
  double threshold_;
  std::deque<double> values_;
};

}  // namespace normlab::probe
