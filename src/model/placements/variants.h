#pragma once
// Every placement's sub-layer function; each is defined in its own file and listed in registry.cpp.
#include "model/placement.h"

namespace normlab::model {

TensorId post_ln(const SubLayer& s, TensorId h);
TensorId pre_ln(const SubLayer& s, TensorId h);

}  // namespace normlab::model
