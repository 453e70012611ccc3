#pragma once
// DeepNorm's α (shortcut) and β (init gain) for each architecture of the DeepNet paper, Table 1.
// The encoder of an encoder-decoder uses the paper's 0.87 by default; torchscale's code computes
// 1.15 instead (spec §4.1). GLM-130B (Zeng et al. 2022, §2.1) uses its own pair, α = (2L)^(1/2) and
// β = (2L)^(−1/2), for its one stack: options.deepnorm_constants = "glm130b".
#include "model/placement.h"

namespace normlab::model {

enum class DeepNormArch { encoder_only, decoder_only, encoder_of_encoder_decoder, decoder_of_encoder_decoder };
struct DeepNormConstants {
  double alpha, beta;
};
DeepNormConstants deepnorm_constants(DeepNormArch arch, int encoder_layers, int decoder_layers,
                                     bool torchscale_beta = false);
// The pair a DeepNorm model of config c uses in one of its stacks, by its switches.
DeepNormConstants deepnorm_constants(const ModelConfig& c, StackSpec::Kind stack);

}  // namespace normlab::model
