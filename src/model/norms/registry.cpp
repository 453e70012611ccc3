// Every norm type, one line each, in the order `normlab variants` lists them.
#include <array>

#include "model/norm.h"

namespace normlab::model {

extern const NormType kLayerNormType, kRmsNormType, kRmsNormGemmaType, kScaleNormType, kDytType, kCrmsNormType,
    kNoNormType;

std::span<const NormType* const> all_norm_types() {
  static const std::array<const NormType*, 7> types = {
      &kLayerNormType,     // layernorm.cpp
      &kRmsNormType,       // rmsnorm.cpp
      &kRmsNormGemmaType,  // rmsnorm_gemma.cpp
      &kScaleNormType,     // scalenorm.cpp
      &kDytType,           // dyt.cpp
      &kCrmsNormType,      // crmsnorm.cpp
      &kNoNormType,        // none.cpp
  };
  return types;
}

}  // namespace normlab::model
