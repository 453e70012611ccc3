#pragma once
// A study's pre-registration: everything that decides its verdict before a seed is run. Its arms (every planned
// run's config, the seed taken out), its sub-claims (statistic, compared arms, side, threshold, test, the paper's
// words), the rule that decides them (the t interval or the sign test, Holm over sub-claims, Bonferroni over the
// planned looks), the seed rule and the preset. `normlab study NAME --preregistration` prints it with its hash;
// report.json records the hash.
//
// Freezing: commit the study with a message containing "frozen NAME HASH" (the hash printed), then run seeds nobody
// has looked at, 1001 onward. A report calls such a seed set "unseen" only when its hash is the frozen one and every
// run behind it was made by a binary built (clean) from the freeze commit or a descendant of it.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/config_reader.h"
#include "study/runner.h"

namespace normlab::study {

struct Study;
struct StudyOptions;

// Seeds from here on are reserved for the unseen sets: no pilot or design run uses them.
inline constexpr int kFirstUnseenSeed = 1001;

// The pre-registration as a JSON document (its key order fixed, so that its dump is the same text on every machine).
Json preregistration(const Study& study, const StudyOptions& options);
// The fnv1a64 of the document's compact dump, 16 hex digits.
std::string preregistration_hash(const Json& preregistration);
// What `--preregistration` prints: the document, indented, then "hash: ..." and how to freeze it.
std::string preregistration_text(const Study& study, const StudyOptions& options);

// Why the runs of a seed set cannot be called unseen ("" when they can): no commit of the git checkout holding
// `study_dir` says "frozen NAME HASH", or a run was made by a dirty or unknown build, or by a commit that does not
// descend from the freeze commit.
std::string unseen_problem(const std::filesystem::path& study_dir, std::string_view study, std::string_view hash,
                           const std::vector<RunOutcome>& runs);

}  // namespace normlab::study
