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

// The findings table alone (the rows of findings_index), its links to each study's folder prefixed with
// `link_prefix` ("results/" for the README at the repository's root).
std::string findings_table(const std::filesystem::path& results, const std::string& link_prefix = "");

// The README's copy of the table sits between these two lines; with_readme_findings returns `readme` with the block
// between them made anew from the reports (links into results/), and fails when the markers are missing.
inline constexpr const char* kReadmeFindingsBegin =
    "<!-- findings: written by `normlab study index results` from the reports in results/; a test compares -->";
inline constexpr const char* kReadmeFindingsEnd = "<!-- /findings -->";
std::string with_readme_findings(const std::string& readme, const std::filesystem::path& results);

}  // namespace normlab::study
