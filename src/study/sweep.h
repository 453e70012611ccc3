#pragma once
// The sweep file of `normlab sweep`: {"base": {run config}, "grid": {"key.path": [values...]}, "seeds": n}.
#include <string>
#include <vector>

#include "study/runner.h"

namespace normlab::study {

// The most runs one sweep file may ask for (the grid's product times the seeds).
inline constexpr std::size_t kMaxSweepRuns = 10000;

// The cartesian product of the grid, each point once per seed (train.seed = 1..seeds), with run ids made
// of the grid's last key parts and values ("placement-post_lr-0.001_s1"). A malformed file is an Error
// naming `where` and the field; the configs themselves are checked by the runner (resolve_config).
std::vector<RunRequest> expand_sweep(const Json& doc, const std::string& where);

// Ends a sweep that had failed runs with an Error (the command exits 1): each one is listed on stderr with its
// message, and the sentence names `summary` and how to finish the sweep.
void require_no_failed_runs(const std::vector<RunOutcome>& outcomes, const std::filesystem::path& summary);

}  // namespace normlab::study
