#pragma once
// Every placement, each defined in its own file and listed in registry.cpp; plus the sub-layer
// forms that several variants share (DLCL wraps Pre-LN and Post-LN blocks, Gemma 2 is Peri-LN ...).
#include "model/placement.h"

namespace normlab::model {

TensorId post_ln(const SubLayer& s, TensorId h);
TensorId pre_ln(const SubLayer& s, TensorId h);
TensorId peri_ln(const SubLayer& s, TensorId h);

extern const Placement kPostLn, kPreLn, kDlclPre, kDlclPost, kReZero, kTFixup, kLipschitz, kAdmin, kScaleNormPre,
    kQkNorm, kSandwich, kNormFormer, kDeepNorm, kSubLn, kResiDual, kPreRms, kPreCrms, kGemma2, kOlmo2, kPeriLn, kMixLn,
    kHybridNorm, kHybridNormStar, kLayerNormScaling, kDyT, kGpas;

// GPAS's learnable gate, `layers.{i}.gpas_gate` (one per layer, scaling both sub-layers) or `layers.{i}.{s}.gpas_gate`
// with the option `gpas_per_sublayer`: spelled here for the placement and for the study that reads the gates back.
inline constexpr const char* kGpasGate = "gpas_gate";
inline constexpr const char* kGpasPerSublayer = "gpas_per_sublayer";

}  // namespace normlab::model
