#pragma once
// The table of statistics: every number a sub-claim reads from a run comes from one entry here. An entry has a name,
// typed parameters (declared in data, so that a claim file is checked against them before anything runs), what its
// number is and in what unit, and the function that reads it from one run's files. A sub-claim (claim_spec.h) names
// an entry with its arguments for each side of its comparison; `normlab study statistics` lists the table.
//
// A statistic returns NaN where the run lacks its number (a failed or missing run, an absent record): the sub-claim
// is then undecided on that seed, never decided from fewer seeds than planned.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_reader.h"
#include "study/runner.h"

namespace normlab::study {

enum class ParamType { integer, number, text };

// One parameter of a statistic. `fallback` is its default as a JSON literal; empty: the parameter is required.
// `choices`, for a text parameter, lists the values it takes ("first|last").
struct StatParam {
  std::string_view name;
  ParamType type;
  std::string_view meaning;
  std::string_view fallback = "";
  std::string_view choices = "";
};

struct Statistic {
  std::string_view name;
  std::string_view meaning;  // what the number is
  std::string_view unit;     // "nats", "ratio-free" quantities say what they measure ("‖∂L/∂W‖", "E[x²]")
  std::vector<StatParam> params;
  // The number of one run (nullptr: the run is missing), given arguments that check_arguments accepted.
  double (*of_run)(const RunOutcome* run, const Json& args);
  // The statistic with its arguments, in words, e.g. "stream mean_square at layer -1, last probe".
  std::string (*describe)(const Json& args);
};

std::span<const Statistic> all_statistics();
// The entry named `name`; fails, naming `where` and listing the table, when there is none.
const Statistic& find_statistic(std::string_view name, std::string_view where);
// The arguments with every default filled in; fails with one sentence naming `where` and the parameter on an
// unknown parameter, a missing required one, a value of the wrong type or a text outside its choices.
Json check_arguments(const Statistic& statistic, const Json& args, std::string_view where);
// Per layer, one tensor's column of the param probes (e.g. ffn.fc2.weight's grad_norm) averaged over the probes of the
// first quarter of training (step ≤ train.steps / 4); NaN for a layer some record lacks, every layer NaN without
// records, empty for a missing run. `first_over_last_layer` reads its ends; a study's chart shows it whole.
std::vector<double> early_layer_means(const RunOutcome* run, const std::string& tensor, const std::string& field);
// `normlab study statistics`: every entry with its meaning, unit and parameters.
std::string statistics_help();

}  // namespace normlab::study
