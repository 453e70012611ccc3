// The registry of placements: one line per variant.
#include <array>

#include "common/error.h"
#include "model/placements/variants.h"

namespace normlab::model {

namespace {
constexpr std::array kPlacements = {
    Placement{"post", "Vaswani et al. 2017, Attention Is All You Need (arXiv 1706.03762)",
              "h = Norm(x + Attn(x));  x' = Norm(h + FFN(h))", false, post_ln},
    Placement{"pre", "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture (arXiv 2002.04745)",
              "h = x + Attn(Norm(x));  x' = h + FFN(Norm(h))", true, pre_ln},
};
}  // namespace

std::span<const Placement> all_placements() { return kPlacements; }

std::vector<std::string> placement_names() {
  std::vector<std::string> names;
  for (const Placement& p : kPlacements) names.emplace_back(p.name);
  return names;
}

const Placement& find_placement(std::string_view name) {
  for (const Placement& p : kPlacements)
    if (p.name == name) return p;
  std::string list;
  for (const Placement& p : kPlacements) list += (list.empty() ? "" : ", ") + std::string(p.name);
  fail("unknown placement '{}' (known: {}; `normlab variants` describes each)", name, list);
}

}  // namespace normlab::model
