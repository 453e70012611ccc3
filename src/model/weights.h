#pragma once
// Moving parameters between a Model and safetensors, by their documented names.
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/transformer.h"

namespace normlab::model {

// Copies every parameter of m from `file` (F32 or F64 accepted, converted to the graph's type).
// Fails naming the file and tensor if one is missing, has the wrong shape, or if `file` holds a
// parameter-like tensor the model does not have (a sign the config and weights disagree).
// Tensors whose names start with one of `ignore_prefixes` (optimizer state, gradients) are skipped.
void load_weights(Model& m, const io::SafetensorsFile& file, const std::vector<std::string>& ignore_prefixes = {});

// The parameters as safetensors entries (pointing into the graph's storage), in the graph's dtype.
std::vector<io::TensorToWrite> weight_entries(const Model& m, const std::string& prefix = "");
// The same for the parameters' gradients.
std::vector<io::TensorToWrite> gradient_entries(const Model& m, const std::string& prefix);

}  // namespace normlab::model
