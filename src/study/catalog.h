#pragma once
// Every study, each defined in its own file and listed in studies.cpp (kStudies).
#include "study/studies.h"

namespace normlab::study {

extern const Study kWhyPreLn, kGradByDepth, kStreamAtInit, kWarmupGrid, kModelUpdate, kOneStep, kDepthVariance,
    kLayerImportance, kGradBalance, kRmsEquivalence, kMassiveActivations, kDytAlpha, kLeaderboard, kBertWarmup,
    kMtDepth;

}  // namespace normlab::study
