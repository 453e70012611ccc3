#pragma once
// The memory guard: before a run allocates its model, estimate the bytes it will hold and compare them
// with the memory the machine (or the cgroup the process runs in) has available, so a config with
// absurd sizes is refused with numbers instead of allocating until the machine gives up.
//
// The estimate is the graph's own arena plan (engine::Graph::lay_out(), the sizes plan() allocates)
// plus what lives beside the graph: AdamW's moments (two per parameter, in the graph's float type), the training
// probe's copies, a checkpoint read whole on resume, the models an analysis builds beside the run's (normlab probe),
// and the process as it stands (code, libraries, token data).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "model/transformer.h"

namespace normlab::train {

// What a run holds besides its model's arenas.
struct MemoryNeeds {
  bool gradients = true;               // parameter and activation gradients (a backward pass); off: inference only
  bool optimizer = false;              // AdamW moments (training)
  bool probes = false;                 // the training probe's fp64 copies (train.probe_every > 0)
  std::uintmax_t checkpoint_file = 0;  // bytes of a checkpoint mapped while the model exists (resume, eval)
  // Models built beside the run's own while it lives, of its batch and length (normlab probe's analyses:
  // analysis::memory_needs), counted in copies of the run's model in its float type: an fp64 copy of an fp32
  // model counts 2. Each copy holds the model's weights, gradients, activations, their gradients and workspace.
  int extra_models = 0;
  int extra_inference_models = 0;  // the same, built without gradients (Graph::set_gradients)
  // Inference-only models that read the run's weights in place (Graph::share_parameters_of): activations alone.
  int extra_sharing_models = 0;
};

struct MemoryEstimate {
  std::size_t parameter_count = 0;
  std::size_t resident = 0;  // the process when estimated: code, libraries, token data (VmRSS)
  std::size_t weights = 0, gradients = 0, optimizer = 0, activations = 0, activation_gradients = 0, workspace = 0,
              widened = 0, probes = 0, checkpoint_read = 0, extra_models = 0;
  // Everything but `resident`: what is still to be allocated. Sums saturate at SIZE_MAX.
  std::size_t to_allocate() const;
  std::size_t peak() const;
  // "weights 1.2 MiB + gradients 1.2 MiB + ..." (parts that are zero are left out).
  std::string breakdown() const;
};

// Estimates for a model built by model::build_unplanned_model (lays its graph out; allocates nothing).
MemoryEstimate estimate_memory(model::Model& unplanned, const MemoryNeeds& needs);

struct AvailableMemory {
  std::size_t bytes = SIZE_MAX;
  std::string source;  // where the number comes from, for messages
};

// The memory this process may still allocate: MemAvailable from /proc/meminfo, lowered to the room left
// under a cgroup limit (v2 memory.max − (memory.current − inactive file cache), or the v1 equivalents)
// of this process's cgroup or any cgroup above it. The roots are parameters so tests can use fake trees.
AvailableMemory available_memory(const std::filesystem::path& proc = "/proc",
                                 const std::filesystem::path& cgroup = "/sys/fs/cgroup");

// Refuses (normlab::Error naming the estimate, its parts and the available memory) when the estimate
// does not fit.
void check_memory(const MemoryEstimate& estimate, const AvailableMemory& available);

// Bytes for people: "812.3 MiB", "1.2 PiB"; SIZE_MAX reads "more than 16 EiB".
std::string human_bytes(std::size_t bytes);

}  // namespace normlab::train
