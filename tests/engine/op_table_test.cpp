// The op table (engine/ops.h) is generated from one list: every kind's row is its own, named after it,
// with both kernels present.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "engine/ops.h"

namespace normlab::engine {
namespace {

TEST(OpTable, EveryKindHasItsOwnRowWithBothKernels) {
  std::set<std::string> names;
  for (size_t i = 0; i < static_cast<size_t>(OpKind::count); ++i) {
    const OpKind kind = static_cast<OpKind>(i);
    const OpDef& def = op_def(kind);
    EXPECT_EQ(def.kind, kind) << "row " << i << " (" << def.name << ") belongs to another kind";
    EXPECT_NE(def.kernels.forward, nullptr) << def.name;
    EXPECT_NE(def.kernels.backward, nullptr) << def.name;
    EXPECT_TRUE(names.insert(def.name).second) << "two rows are named " << def.name;
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(OpKind::count));
  EXPECT_STREQ(op_def(OpKind::layer_norm).name, "layer_norm");
  EXPECT_STREQ(op_def(OpKind::pb_relax).name, "pb_relax");
}

}  // namespace
}  // namespace normlab::engine
