#pragma once
// The real models' norm choices as presets (`--preset llama`, `normlab presets`): each model's published norm
// type and placement, ε, activation, positions, biases, tying, soft-caps, QK-norm and init, read from its paper
// and released config (named in `source`), at a small size (d 128, 4 layers, 4 heads) that --set overrides. A
// preset is the first layer of a run's config: built-in defaults < preset < --config file < --set. The 2017
// Transformer (`vaswani`) also sets its paper's optimizer and schedule (the train section).
#include <string>
#include <vector>

#include "common/config_reader.h"

namespace normlab::model {

struct Preset {
  std::string name, title;
  std::string source;                   // the paper and the config file the fields were read from
  Json model;                           // the model section it sets
  std::vector<std::string> deviations;  // what the real model has that normlab does not model
  Json train = Json::object();          // the train section it sets: the paper's optimizer, where it trains one
};

const std::vector<Preset>& all_presets();
// The preset named `name`; fails listing the known ones.
const Preset& find_preset(const std::string& name);

}  // namespace normlab::model
