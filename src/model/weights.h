#pragma once
// Moving parameters between a Model and safetensors, by their documented names.
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/transformer.h"

namespace normlab::model {

// Copies every parameter of m from `file` (F32, F64, BF16 or F16, converted exactly to the graph's type; a parameter
// stored as bf16 takes the BF16 tensor's bits as they are).
// Fails naming the file and tensor if one is missing, has the wrong shape, or if `file` holds a
// parameter-like tensor the model does not have (a sign the config and weights disagree).
// Tensors whose names start with one of `ignore_prefixes` (optimizer state, gradients) are skipped.
void load_weights(Model& m, const io::SafetensorsFile& file, const std::vector<std::string>& ignore_prefixes = {});

// Before m's graph is planned: every parameter whose tensor in `file` is BF16 (of the parameter's shape) is stored as
// bf16 (engine::Graph::store_as_bf16), when the graph is inference-only and fp32; otherwise nothing changes. Returns
// how many. Then load_weights copies their bits, and the model computes exactly what the widened fp32 weights give.
int keep_bf16_weights(Model& unplanned, const io::SafetensorsFile& file);

// The parameters as safetensors entries (pointing into the graph's storage), in the graph's dtype.
std::vector<io::TensorToWrite> weight_entries(const Model& m, const std::string& prefix = "");
// The same for the parameters' gradients.
std::vector<io::TensorToWrite> gradient_entries(const Model& m, const std::string& prefix);

}  // namespace normlab::model
