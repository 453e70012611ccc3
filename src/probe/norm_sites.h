#pragma once
// Every norm in a graph, found by op kind on the tape, so probes work for any placement.
#include <string>
#include <vector>

#include "engine/graph.h"

namespace normlab::probe {

struct NormSite {
  std::string name;  // the norm's parameter prefix, e.g. layers.3.attn.in_norm
  int node;          // its index on the tape
};
std::vector<NormSite> norm_sites(const engine::Graph& g);

// inv_sigma: the mean over rows of the norm's 1/σ (1/RMS, or g/‖x‖ for ScaleNorm), i.e. the scale of
// its Jacobian; input_rms: the mean of ‖x‖/√d over rows (DeepNet's LN-input size). DyT has no σ:
// its inv_sigma is α (the slope at 0).
struct NormReading {
  double inv_sigma = 0, input_rms = 0;
};
NormReading read_norm(const engine::Graph& g, const NormSite& site);

}  // namespace normlab::probe
