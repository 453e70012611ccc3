#pragma once
// `normlab study @my-claim.json`: a claim written as data, run as a built-in study is (the same seeds, intervals,
// report and live view), with no C++. The file states the study's name and papers, what every run shares (`set`,
// dotted config keys over the studies' small decoder LM; `quick` on top for --quick), its arms (each a label and the
// fields it sets: a built-in placement, a formula placement "@file.json", a learning rate ...), and its sub-claims
// over the statistics table (statistics.h), each as claim_spec.h states one. docs/studies.md, "Your own claim",
// teaches the format; examples/claims/ holds worked claims.
#include <filesystem>
#include <memory>

#include "study/studies.h"

namespace normlab::study {

// A claim file read and checked; it owns the text its Study points into, so it lives as long as the study runs.
struct ClaimFile;

// Reads and checks `file`: every field's type, every arm's config (resolved as a run's would be), every sub-claim's
// statistic, arguments, arms and threshold. Fails with one sentence naming the file, the field and the fix.
std::shared_ptr<const ClaimFile> read_claim_file(const std::filesystem::path& file);
const Study& study_of(const ClaimFile& claim);

}  // namespace normlab::study
