// Pre-registration and the unseen seed sets (study/preregistration.h): the document and its hash, and the check that
// lets a report call a seed set "unseen" only when every run behind it was made at or after its freeze commit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "study/preregistration.h"
#include "study/studies.h"
#include "train/tiny_corpus.h"

namespace normlab::study {
namespace {

namespace fs = std::filesystem;
using train::testing::TempDir;

StudyOptions default_preset(const Study& study) {
  StudyOptions o;
  choose_seeds(o, std::string(study.default_seeds), SeedSchedule::kDefaultCap);
  return o;
}

// The hash names the whole pre-registration: every study has one, and changing its grid changes it.
TEST(Preregistration, EveryStudyHasOneAndItsHashFollowsTheDesign) {
  for (const Study* s : all_studies()) {
    const Json doc = preregistration(*s, default_preset(*s));
    EXPECT_EQ(doc["study"], s->name);
    EXPECT_FALSE(doc["sub_claims"].empty()) << s->name;
    EXPECT_FALSE(doc["arms"].empty()) << s->name;
    EXPECT_EQ(preregistration_hash(doc).size(), 16u);
    EXPECT_EQ(preregistration_hash(doc), preregistration_hash(preregistration(*s, default_preset(*s))));
  }
  const Study& flagship = find_study("why-pre-ln");
  StudyOptions other = default_preset(flagship);
  other.grid = {"model.n_layers=6,24"};
  EXPECT_NE(preregistration_hash(preregistration(flagship, other)),
            preregistration_hash(preregistration(flagship, default_preset(flagship))));
  EXPECT_NE(preregistration_text(flagship, default_preset(flagship)).find("frozen why-pre-ln "), std::string::npos);
  // A fixed plan's length is part of it: the flagship's 10 seeds run as 1001-1020 are not what was frozen.
  StudyOptions longer = default_preset(flagship);
  choose_seeds(longer, "1001-1020", SeedSchedule::kDefaultCap);
  StudyOptions same_length = default_preset(flagship);
  choose_seeds(same_length, "1001-1010", SeedSchedule::kDefaultCap);
  EXPECT_NE(preregistration_hash(preregistration(flagship, longer)),
            preregistration_hash(preregistration(flagship, default_preset(flagship))));
  EXPECT_EQ(preregistration_hash(preregistration(flagship, same_length)),
            preregistration_hash(preregistration(flagship, default_preset(flagship))));
}

std::string run_in(const fs::path& dir, const std::string& command) {
  const std::string line = "cd '" + dir.string() + "' && " + command + " > out.txt 2>&1";
  EXPECT_EQ(std::system(line.c_str()), 0) << command << ": " << train::testing::slurp(dir / "out.txt");
  std::string out = train::testing::slurp(dir / "out.txt");
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return out;
}

std::string commit(const fs::path& repo, const std::string& message) {
  std::ofstream(repo / "file.txt", std::ios::app) << message << "\n";
  run_in(repo, "git add file.txt && git -c user.name=t -c user.email=t@t commit -q -m '" + message + "'");
  return run_in(repo, "git rev-parse HEAD");
}

RunOutcome made_by(const std::string& commit) {
  RunOutcome run;
  run.request.id = "post-s1001";
  run.made_by = commit;
  return run;
}

// A git history before, at and after a freeze: runs count as unseen only from the freeze commit on.
TEST(Preregistration, ASeedSetIsUnseenOnlyWhenEveryRunFollowsTheFreeze) {
  TempDir repo("prereg");
  run_in(repo.path(), "git init -q .");
  const std::string before = commit(repo.path(), "pilot");
  EXPECT_NE(unseen_problem(repo.path(), "why-pre-ln", "00ab", {made_by(before)}).find("no commit says"),
            std::string::npos);
  const std::string freeze = commit(repo.path(), "frozen why-pre-ln 00ab");
  const std::string after = commit(repo.path(), "unrelated");
  EXPECT_EQ(unseen_problem(repo.path(), "why-pre-ln", "00ab", {made_by(freeze), made_by(after)}), "");
  EXPECT_EQ(unseen_problem(repo.path(), "why-pre-ln", "00ab", {made_by(after.substr(0, 8))}), "");
  const std::string early = unseen_problem(repo.path(), "why-pre-ln", "00ab", {made_by(freeze), made_by(before)});
  EXPECT_NE(early.find("does not descend from the freeze commit"), std::string::npos) << early;
  EXPECT_NE(unseen_problem(repo.path(), "why-pre-ln", "00ab", {made_by(after + "-dirty")}).find("not a clean build"),
            std::string::npos);
  EXPECT_NE(unseen_problem(repo.path(), "why-pre-ln", "00ab", {made_by("unknown")}).find("not a clean build"),
            std::string::npos);
  EXPECT_NE(unseen_problem(repo.path(), "why-pre-ln", "ffff", {made_by(after)}).find("no commit says"),
            std::string::npos);  // another design's hash
}

// A frozen pre-registration (results/NAME/preregistration.json, committed with "frozen NAME HASH") is what the code
// still plans and judges: a change to a frozen study's arms, statistics, thresholds or rule needs a new freeze, and
// seeds run before it are not unseen under the new design.
TEST(Preregistration, TheFrozenOnesAreWhatTheCodeStillDoes) {
  const fs::path results = fs::path(NORMLAB_SOURCE_DIR) / "results";
  for (const Study* s : all_studies()) {
    const fs::path file = results / s->name / "preregistration.json";
    if (!fs::exists(file)) continue;
    std::ifstream in(file);
    const Json frozen = Json::parse(in);
    const Json now = preregistration(*s, default_preset(*s));
    EXPECT_EQ(preregistration_hash(now), frozen["hash"].get<std::string>())
        << s->name << ": the code no longer matches its frozen pre-registration; first difference at "
        << Json::diff(frozen["preregistration"], now).dump().substr(0, 300);
  }
}

// Every kept unseen set: its report says "unseen", and its runs pass the check again now.
TEST(Preregistration, KeptUnseenSetsFollowTheirFreeze) {
  const fs::path results = fs::path(NORMLAB_SOURCE_DIR) / "results";
  if (std::system(("git -C '" + results.string() + "' rev-parse --is-shallow-repository | grep -q true").c_str()) == 0)
    GTEST_SKIP() << "a shallow clone lacks the history the freeze commits are in";
  for (const Study* s : all_studies()) {
    const fs::path dir = results / s->name / "unseen";
    if (!fs::exists(dir / "report.json")) continue;
    std::ifstream in(dir / "report.json");
    const Json report = Json::parse(in);
    EXPECT_EQ(report["seed_set"], "unseen") << dir;
    std::vector<RunOutcome> runs;
    for (const auto& run : fs::directory_iterator(dir / "runs")) {
      std::ifstream status(run.path() / "status.json");
      RunOutcome o = made_by(Json::parse(status).value("normlab", std::string("not recorded")));
      o.request.id = run.path().filename().string();
      runs.push_back(o);
    }
    EXPECT_EQ(unseen_problem(dir, s->name, report["preregistration"].get<std::string>(), runs), "") << dir;
  }
}

}  // namespace
}  // namespace normlab::study
