#pragma once
// Pre-LN → Pre-CRMSNorm weight conversion (Jiang et al. 2023, spec §1.3): the converted model computes
// the same logits as the Pre-LN model, on a residual stream one coordinate narrower and with
// non-affine norms. The derivation is in crms_convert.cpp.
#include "model/config.h"
#include "model/transformer.h"

namespace normlab::model {

// The configuration of the Pre-CRMSNorm model equivalent to the Pre-LN model `pre_ln`: the same
// sizes, activation, positions, biases, embedding scale, soft-caps and ε, with placement `pre_crms`.
// Fails (normlab::Error) if `pre_ln` is not convertible (see convert_pre_ln_to_crms).
ModelConfig crms_config_for(const ModelConfig& pre_ln);

// The inverse: the Pre-LN model (bias-free LayerNorm with the same ε, untied) whose conversion has the configuration
// `crms` (placement pre_crms), with the same init otherwise (init.from_pre_ln off).
ModelConfig pre_ln_config_for(const ModelConfig& crms);

// Writes into `crms` (built from crms_config_for(pre_ln.config), any batch/seq/dtype) the weights
// that make it compute exactly the logits of `pre_ln`. The source must be placement `pre` with
// norm.type layernorm, norm.bias = false, tied_embeddings = false, a final norm, and no extra norms
// (embed_norm, qk_norm, v_norm, pb_relax). Fails with a normlab::Error naming the first mismatch.
void convert_pre_ln_to_crms(const Model& pre_ln, Model& crms);

}  // namespace normlab::model
