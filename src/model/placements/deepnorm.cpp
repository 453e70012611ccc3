// DeepNorm: Wang et al., "DeepNet: Scaling Transformers to 1,000 Layers" (arXiv 2203.00555). §2.12
//
//   h ← LN(α·h + F(h)),   α = (2L)^(1/4);  v, o, fc1, fc2 initialized with gain β = (8L)^(−1/4)
//
// Post-LN whose shortcut outweighs the branch by α while β keeps the branch's update small, so the
// model update stays bounded. In an encoder-decoder (N encoder, M decoder layers) each stack has its own pair,
// Table 1: α_e = 0.81 (N⁴M)^(1/16), β_e = 0.87 (N⁴M)^(−1/16); α_d = (3M)^(1/4), β_d = (12M)^(−1/4); the decoder's
// β covers its cross-attention's v and o too. GLM-130B's pair (Zeng et al. 2022, §2.1) is the switch
// deepnorm_constants = "glm130b": α = (2L)^(1/2), β = (2L)^(−1/2).
#include "model/placements/deepnorm.h"

#include <cmath>

#include "model/init.h"
#include "model/placements/variants.h"

namespace normlab::model {

DeepNormConstants deepnorm_constants(DeepNormArch arch, int n, int m, bool torchscale_beta) {
  const double N = n, M = m;
  switch (arch) {
    case DeepNormArch::encoder_only:
      return {std::pow(2 * N, 0.25), std::pow(8 * N, -0.25)};
    case DeepNormArch::decoder_only:
      return {std::pow(2 * M, 0.25), std::pow(8 * M, -0.25)};
    case DeepNormArch::encoder_of_encoder_decoder:
      return {0.81 * std::pow(N * N * N * N * M, 1.0 / 16),
              (torchscale_beta ? 1.15 : 0.87) * std::pow(N * N * N * N * M, -1.0 / 16)};
    case DeepNormArch::decoder_of_encoder_decoder:
      return {std::pow(3 * M, 0.25), std::pow(12 * M, -0.25)};
  }
  return {1, 1};
}

DeepNormConstants deepnorm_constants(const ModelConfig& c, StackSpec::Kind stack) {
  if (option(c, "deepnorm_constants").get<std::string>() == "glm130b") {
    if (c.encoder_decoder())
      fail(
          "model.options.deepnorm_constants = \"glm130b\" is GLM-130B's pair for one stack; an encoder-decoder "
          "takes DeepNet's Table 1 (\"deepnet\")");
    const double two_l = 2.0 * c.n_layers;
    return {std::sqrt(two_l), 1 / std::sqrt(two_l)};
  }
  const DeepNormArch arch = stack == StackSpec::encoder   ? DeepNormArch::encoder_of_encoder_decoder
                            : stack == StackSpec::decoder ? DeepNormArch::decoder_of_encoder_decoder
                                                          : DeepNormArch::decoder_only;
  return deepnorm_constants(arch, c.source_layers(), c.n_layers,
                            option(c, "deepnorm_beta").get<std::string>() == "torchscale");
}

namespace {
using engine::Role;
constexpr Switch kSwitches[] = {
    {"deepnorm_init", "\"paper\"",
     "paper: Xavier-normal gain β on v, o, fc1, gate, fc2 (gain 1 on q, k), zero biases | "
     "torchscale: the base init × β, biases too (torchscale issue #16)",
     "paper|torchscale"},
    {"deepnorm_beta", "\"paper\"",
     "encoder-decoder only: paper: the encoder's β_e = 0.87 (N⁴M)^(−1/16) (Table 1) | "
     "torchscale: 1.15 (N⁴M)^(−1/16), as torchscale's code computes it",
     "paper|torchscale"},
    {"deepnorm_constants", "\"deepnet\"",
     "deepnet: DeepNet's α and β (Table 1) | glm130b: GLM-130B's α = (2L)^(1/2), β = (2L)^(−1/2) (Zeng et al. "
     "2022, §2.1; one stack only)",
     "deepnet|glm130b", false}};

TensorId deepnorm(const SubLayer& s, TensorId h) {
  const double alpha = deepnorm_constants(s.config(), s.spec().kind).alpha;
  return s.norm("post_norm", s.add(h, s.branch(h), alpha, 1.0));
}

void deepnorm_init(InitContext& ctx) {
  Model& m = ctx.model;
  const bool torchscale = option(m.config, "deepnorm_init").get<std::string>() == "torchscale";
  if (!torchscale) redraw_xavier(m, {Role::q, Role::k}, 1.0, true, ctx.seed);
  const auto stacks =
      m.config.encoder_decoder() ? std::vector{StackSpec::encoder, StackSpec::decoder} : std::vector{StackSpec::single};
  for (StackSpec::Kind stack : stacks) {
    const double beta = deepnorm_constants(m.config, stack).beta;
    const std::string under = StackSpec{stack}.prefix();
    if (torchscale) scale_roles(m, {Role::v, Role::o, Role::fc1, Role::gate, Role::fc2}, beta, true, under);
    else redraw_xavier(m, {Role::v, Role::o, Role::fc1, Role::gate, Role::fc2}, beta, true, ctx.seed, under);
  }
}
// The DeepNorm pair of each stack, by name ("layers" for a one-stack model's), for an export's constants.
Json deepnorm_export_constants(const ModelConfig& c) {
  Json alpha = Json::object(), beta = Json::object();
  for (const StackSpec& t : stacks(c)) {
    const std::string side = t.kind == StackSpec::single ? "layers" : t.prefix() + "layers";
    const DeepNormConstants k = deepnorm_constants(c, t.kind);
    alpha[side] = k.alpha;
    beta[side] = k.beta;
  }
  return Json{{"deepnorm_alpha", alpha},
              {"deepnorm_beta", beta},
              {"deepnorm_note",
               "α weighs the shortcut in h ← LN(α·h + F(h)) in every sub-layer of the stack; β was the init gain of v, "
               "o, fc1, gate and fc2 (the weights hold its effect)"}};
}
}  // namespace

extern const Placement kDeepNorm{
    .name = "deepnorm",
    .display_name = "DeepNorm",
    .paper = "Wang et al. 2022, DeepNet: Scaling Transformers to 1,000 Layers (arXiv 2203.00555)",
    .equations = "h = LN(α·x + Attn(x));  x' = LN(α·h + FFN(h));  α = (2L)^(1/4)",
    .final_norm = false,
    .switches = kSwitches,
    .sublayer = deepnorm,
    .init = deepnorm_init,
    .init_rule =
        "Xavier-normal gain β = (8L)^(-1/4) on v, o, fc1, gate, fc2; gain 1 on q, k (encoder-decoder: β_e, β_d)",
    .notes = "paper init by default (torchscale scales the existing init and biases: deepnorm_init = torchscale)",
    .export_constants = deepnorm_export_constants,
};

}  // namespace normlab::model
