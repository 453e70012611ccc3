#pragma once
// Initialization is its own pass over the named parameters, keyed on each one's role (q, k, v, o,
// fc1, gate, fc2, embedding, head, norm gain, bias), so that depth-aware rules apply to exactly the
// matrices their papers name. Each parameter draws from its own random stream, derived from the
// seed and its name, so adding a parameter never changes another's values.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/rng.h"
#include "model/transformer.h"

namespace normlab::model {

// What an init rule sees: the model after its base init, the seed, and a batch of real tokens for
// rules that profile a forward pass (Admin); tokens may be null, then a random batch is used.
struct InitContext {
  Model& model;
  uint64_t seed;
  const int32_t* tokens = nullptr;
  const int32_t* targets = nullptr;
};

// Fills every parameter of m by m.config.init, then applies the placement's init rule.
void initialize(Model& m, uint64_t seed, const int32_t* tokens = nullptr, const int32_t* targets = nullptr);

// Helpers for init rules. Roles select parameters; a rule names the roles its paper names.
using RoleSet = std::initializer_list<engine::Role>;
// Multiplies every parameter with one of `roles` (matrices) by factor; with_biases also scales the
// `.bias` beside each such matrix (torchscale's DeepNorm and Sub-LN do). `under`: only parameters whose names start
// with it (one stack of an encoder-decoder, "encoder." or "decoder.").
void scale_roles(Model& m, RoleSet roles, double factor, bool with_biases = false, std::string_view under = "");
// Redraw every parameter with one of `roles` from N(0, std), U(−bound, bound), or Xavier (normal or
// uniform, with a gain, from each matrix's own fan-in and fan-out); `under` as for scale_roles.
void redraw_normal(Model& m, RoleSet roles, double std, uint64_t seed, std::string_view under = "");
// N(0, std²) truncated at ±3·std by redrawing (torch's trunc_normal_(std, a = −3std, b = 3std), as
// OLMo's and Megatron's code call it): std is σ before truncation; the realized variance is 0.9733·σ².
void redraw_truncated_normal(Model& m, RoleSet roles, double std, uint64_t seed, std::string_view under = "");
void redraw_uniform(Model& m, RoleSet roles, double bound, uint64_t seed, std::string_view under = "");
void redraw_xavier(Model& m, RoleSet roles, double gain, bool normal, uint64_t seed, std::string_view under = "");
// A standard normal draw truncated to [−bound, bound] (rejection sampling: exact, not clipped).
double truncated_normal(Rng& rng, double bound = 3.0);
// Sets parameter `name` (all entries) to value.
void fill_constant(Model& m, const std::string& name, double value);

// The realized statistics of one parameter after initialization (for `normlab init-report`).
struct ParamStats {
  std::string name;
  std::string role;
  std::string shape;
  double mean, std, rms;
};
std::vector<ParamStats> parameter_stats(const Model& m);

}  // namespace normlab::model
