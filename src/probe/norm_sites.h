#pragma once
// Every norm in a graph, found on the tape by the op its norm type records (model/norm.h), so probes
// work for any placement and any registered norm type.
#include <string>
#include <vector>

#include "engine/graph.h"

namespace normlab::probe {

struct NormSite {
  std::string name;  // the norm's parameter prefix, e.g. layers.3.attn.in_norm
  int node;          // its index on the tape
};
std::vector<NormSite> norm_sites(const engine::Graph& g);

// inv_sigma: the mean over rows of the norm's Jacobian scale, read by its norm type (1/σ; 1/RMS;
// g/‖x‖ for ScaleNorm; α for DyT, which has no σ); input_rms: the mean of ‖x‖/√d over rows (DeepNet's
// LN-input size).
struct NormReading {
  double inv_sigma = 0, input_rms = 0;
};
NormReading read_norm(const engine::Graph& g, const NormSite& site);

}  // namespace normlab::probe
