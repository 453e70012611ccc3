#include "study/preregistration.h"

#include <fmt/core.h>

#include <cstdio>

#include "common/error.h"
#include "io/atomic_file.h"
#include "study/studies.h"

namespace normlab::study {

namespace fs = std::filesystem;

namespace {

// Every planned run of one seed, as the plan states it, with the seed taken out: what each arm is.
Json arms_of(const Study& study, StudyOptions options) {
  options.seeds = {1};
  Json arms = Json::array();
  for (RunRequest& r : plan_study(study, options)) {
    r.config["train"].erase("seed");
    arms.push_back({{"id", r.id.substr(0, r.id.rfind("-s1"))},
                    {"kind", r.kind},
                    {"analyses", r.analyses},
                    {"probe_flags", r.probe_flags},
                    {"config", r.config}});
  }
  return arms;
}

Json sub_claims_of(const Report& report) {
  Json claims = Json::array();
  for (const SubClaim& c : report.claims)
    claims.push_back({{"id", c.id},
                      {"statement", c.statement},
                      {"statistic", c.statistic},
                      {"test", c.test_name()},
                      {"holds_when", c.threshold()},
                      {"control_at_init", c.init_statistic},
                      {"quote", c.quote},
                      {"where", c.where}});
  return claims;
}

// The study's rule in words as the hash covers it: its sub-claims' rules and the seed rule (not the judge's notes).
std::string rule_of(const Study& study, const StudyOptions& options) {
  return sub_claims_rule(study, options) + " " + seed_rule_text(options.schedule);
}

// A git command's output in `dir` (trailing white space removed); nullopt when it fails.
std::optional<std::string> git(const fs::path& dir, const std::string& arguments) {
  if (dir.string().find('\'') != std::string::npos) return std::nullopt;
  const std::string command = "git -C '" + dir.string() + "' " + arguments + " 2>/dev/null";
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return std::nullopt;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
  if (pclose(pipe) != 0) return std::nullopt;
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return out;
}

}  // namespace

Json preregistration(const Study& study, const StudyOptions& given) {
  StudyOptions options = given;
  if (options.axes.empty()) resolve_axes(study, options);
  options.seeds = {1};
  const Report judged = judge_study(study, options, {});
  return {{"study", study.name},
          {"preset", options.quick   ? "quick"
                     : options.large ? "large"
                                     : "default"},
          {"overrides", options.overrides},
          {"axes", options.axes},
          {"seed_rule",
           {{"automatic", given.auto_seeds},
            // The most seeds the plan runs: the cap of auto, or the length of a fixed list, so that a fixed
            // plan run on more seeds than it froze is a different plan and its seeds are not called unseen.
            {"cap", given.auto_seeds ? given.max_seeds : static_cast<int>(given.seeds.size())},
            {"planned_looks", given.schedule.looks},
            {"family_alpha", SeedSchedule::kFamilyAlpha}}},
          {"arms", arms_of(study, options)},
          {"sub_claims", sub_claims_of(judged)},
          {"rule", rule_of(study, options)}};
}

std::string preregistration_hash(const Json& preregistration) {
  return fmt::format("{:016x}", io::fnv1a64(preregistration.dump()));
}

std::string preregistration_text(const Study& study, const StudyOptions& options) {
  const Json doc = preregistration(study, options);
  const std::string hash = preregistration_hash(doc);
  return fmt::format(
      "{}\nhash: {}\nTo freeze it: commit with a message containing \"frozen {} {}\", then run seeds from {} on "
      "(--seeds auto:{}) with a binary built from that commit; the report calls them unseen.\n",
      doc.dump(2), hash, study.name, hash, kFirstUnseenSeed, kFirstUnseenSeed);
}

std::string unseen_problem(const fs::path& study_dir, std::string_view study, std::string_view hash,
                           const std::vector<RunOutcome>& runs) {
  const auto freeze = git(study_dir, fmt::format("log -F --format=%H --grep='frozen {} {}'", study, hash));
  if (!freeze) return fmt::format("{} is not inside a git checkout whose history can be read", study_dir.string());
  if (freeze->empty()) return fmt::format("no commit says \"frozen {} {}\"", study, hash);
  const std::string first = freeze->substr(freeze->rfind('\n') == std::string::npos ? 0 : freeze->rfind('\n') + 1);
  for (const RunOutcome& run : runs) {
    const std::string& made_by = run.made_by;
    const bool plain = !made_by.empty() && made_by.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!plain) return fmt::format("run {} was made by \"{}\", not a clean build of a commit", run.request.id, made_by);
    if (!git(study_dir, fmt::format("merge-base --is-ancestor {} {}", first, made_by)))
      return fmt::format("run {} was made by {}, which does not descend from the freeze commit {}", run.request.id,
                         made_by.substr(0, 12), first.substr(0, 12));
  }
  return "";
}

}  // namespace normlab::study
