#pragma once
// Every study, each defined in its own file and listed in studies.cpp (kStudies).
#include "study/studies.h"

namespace normlab::study {

extern const Study kWhyPreLn, kGradByDepth, kStreamAtInit, kWarmupGrid, kModelUpdate, kOneStep, kDepthVariance,
    kLayerImportance, kGradBalance, kRmsEquivalence, kMassiveActivations, kDytAlpha, kLeaderboard, kBertWarmup,
    kMtDepth;

// Xiong et al. 2020's Theorem 1, which why-pre-ln and grad-by-depth both test.
inline constexpr const char* kXiongTheorem1 =
    "Theorem 1: for Post-LN, ‖∂L/∂W^{2,L}‖_F ≤ O(d√(ln d)), independent of L; for Pre-LN, ≤ O(d√(ln d / L))";

}  // namespace normlab::study
