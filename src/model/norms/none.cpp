// No norm: the slot passes its input through (norm-free stacks such as ReZero and T-Fixup, or an
// ablation of one slot).
#include "model/norm.h"

namespace normlab::model {

extern const NormType kNoNormType{
    .name = "none",
    .paper = "",
    .equation = "y = x",
    .build = [](Graph&, const NormArgs& a) { return a.x; },
};

}  // namespace normlab::model
