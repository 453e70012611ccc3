#pragma once
// The spelling of probes.jsonl (probe/training_probe.h): each line is {"step", "family", <columns>}, one family of
// per-layer or per-tensor columns. The writer, the studies that read it and the live view's JavaScript (through
// probe_fields()) take the names from here, so a rename breaks the build or a test instead of emptying a chart.
#include "common/config_reader.h"

namespace normlab::probe {

namespace field {
inline constexpr const char* step = "step";
inline constexpr const char* family = "family";
// What a column's entries are: layers (0 = entering the first, L = the stack's output) or tensor names.
inline constexpr const char* layer = "layer";
inline constexpr const char* sublayer = "sublayer";
inline constexpr const char* name = "name";
// The quantities.
inline constexpr const char* mean_square = "mean_square";
inline constexpr const char* rms = "rms";
inline constexpr const char* max_abs = "max_abs";
inline constexpr const char* grad_norm = "grad_norm";
inline constexpr const char* inv_sigma = "inv_sigma";
inline constexpr const char* input_rms = "input_rms";
inline constexpr const char* weight_norm = "weight_norm";
inline constexpr const char* update_norm = "update_norm";
inline constexpr const char* update_ratio = "update_ratio";
inline constexpr const char* value = "value";
inline constexpr const char* loss = "loss";
inline constexpr const char* logit_change_rms = "logit_change_rms";
}  // namespace field

// The families (docs/probes.md).
namespace family {
inline constexpr const char* stream = "stream";              // layer: mean_square, rms, max_abs, grad_norm
inline constexpr const char* branch = "branch";              // layer, sublayer: rms, max_abs
inline constexpr const char* norm = "norm";                  // name: inv_sigma, input_rms
inline constexpr const char* param = "param";                // name: weight_norm, grad_norm
inline constexpr const char* scalar = "scalar";              // name: value
inline constexpr const char* loss = "loss";                  // loss, grad_norm
inline constexpr const char* update = "update";              // name: update_norm, update_ratio
inline constexpr const char* model_update = "model_update";  // logit_change_rms
}  // namespace family

// The names above as one JSON object keyed by their C++ names, the families under "families", for the live view.
Json probe_fields();

}  // namespace normlab::probe
