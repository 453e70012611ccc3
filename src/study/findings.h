#pragma once
// The findings index: results/README.md, generated from the report.json of every study run kept under results/
// (results/<study>/<seed set>/), one row per study with its claim, paper, verdict on the design seeds (1, 2, 3 …)
// and on the fresh seeds (101, 102, 103 …), headline effect and interval, seeds, model size, steps and cost.
// Nothing in it is typed by hand: `normlab study index results` writes it, and `--check` fails when the committed
// file differs from what the reports say.
#include <filesystem>
#include <string>

namespace normlab::study {

// The index's Markdown for the reports under `results` (deterministic: the same reports give the same bytes).
std::string findings_index(const std::filesystem::path& results);

// The findings table alone (the rows of findings_index), for the README's "what the studies found".
std::string findings_table(const std::filesystem::path& results);

}  // namespace normlab::study
