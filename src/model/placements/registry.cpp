// The registry of placements: one line per variant.
#include <array>

#include "common/error.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
const std::array kPlacements = {
    &kPostLn,     &kPreLn,          &kDlclPre,          &kDlclPost, &kReZero,     &kTFixup,   &kLipschitz,
    &kAdmin,      &kScaleNormPre,   &kQkNorm,           &kSandwich, &kNormFormer, &kDeepNorm, &kSubLn,
    &kResiDual,   &kPreRms,         &kPreCrms,          &kGemma2,   &kOlmo2,      &kPeriLn,   &kMixLn,
    &kHybridNorm, &kHybridNormStar, &kLayerNormScaling, &kDyT,      &kGpas,
};
}  // namespace

std::span<const Placement* const> all_placements() { return kPlacements; }

std::vector<std::string> placement_names() {
  std::vector<std::string> names;
  for (const Placement* p : kPlacements) names.emplace_back(p->name);
  return names;
}

const Placement& find_placement(std::string_view name) {
  for (const Placement* p : kPlacements)
    if (p->name == name) return *p;
  std::string list;
  for (const Placement* p : kPlacements) list += (list.empty() ? "" : ", ") + std::string(p->name);
  fail("unknown placement '{}' (known: {}; `normlab variants` describes each)", name, list);
}

std::string placement_label(std::string_view placement) {
  for (const Placement* p : kPlacements)
    if (p->name == placement) return std::string(p->display_name);
  return std::string(placement);
}

}  // namespace normlab::model
