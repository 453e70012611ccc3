#pragma once
// DeepNorm's α (shortcut) and β (init gain) for each architecture of the DeepNet paper, Table 1.
// The encoder of an encoder-decoder uses the paper's 0.87 by default; torchscale's code computes
// 1.15 instead (spec §4.1).
namespace normlab::model {

enum class DeepNormArch { encoder_only, decoder_only, encoder_of_encoder_decoder, decoder_of_encoder_decoder };
struct DeepNormConstants {
  double alpha, beta;
};
DeepNormConstants deepnorm_constants(DeepNormArch arch, int encoder_layers, int decoder_layers,
                                     bool torchscale_beta = false);

}  // namespace normlab::model
