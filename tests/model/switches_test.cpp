// The switches of model.options (model/placement.h): every string switch names its values, its default among them,
// and a config giving another value is refused with the list (issue 35.2).
#include <gtest/gtest.h>

#include <algorithm>

#include "model/config.h"
#include "model/placement.h"

namespace normlab::model {
namespace {

TEST(ModelSwitches, EveryStringSwitchNamesItsValuesWithItsDefaultAmongThem) {
  int string_switches = 0;
  for (const Placement* p : all_placements())
    for (auto table : {common_switches(), p->switches})
      for (const Switch& s : table) {
        SCOPED_TRACE(std::string(p->name) + " " + std::string(s.name));
        const Json value = Json::parse(s.default_json);
        const std::vector<std::string> choices = switch_choices(*p, s.name);
        if (!value.is_string()) {
          EXPECT_TRUE(choices.empty()) << "values given for a switch that is not a string";
          continue;
        }
        ++string_switches;
        EXPECT_GE(choices.size(), 2u);
        EXPECT_NE(std::find(choices.begin(), choices.end(), value.get<std::string>()), choices.end());
      }
  EXPECT_GE(string_switches, 6);
}

TEST(ModelSwitches, AValueOutsideTheListIsRefusedWithTheList) {
  const auto refused = [](const Json& model, const std::string& fragment) {
    try {
      read_model_config(model, "config.json: model");
      ADD_FAILURE() << "accepted " << model.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  refused({{"options", {{"qk_norm", "Full"}}}},
          "config.json: model.options.qk_norm: 'Full' is not one of: none, full, per_head, l2");
  refused({{"placement", "lns"}, {"options", {{"lns_form", "bogus"}}}}, "'bogus' is not one of: constant, gain_init");
  refused({{"placement", "normformer"}, {"options", {{"head_scale", "bogus"}}}},
          "'bogus' is not one of: paper, fairseq");
  const ModelConfig c = read_model_config({{"placement", "lns"}, {"options", {{"lns_form", "gain_init"}}}}, "m");
  EXPECT_EQ(c.options["lns_form"], "gain_init");
}

}  // namespace
}  // namespace normlab::model
