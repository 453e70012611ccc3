// Nothing a run writes lands outside the run directory the user named (issue 11.6): a directory given
// with `..` or as an absolute path gets exactly its files, and links planted inside a run directory
// (a log or a stale temp file pointing elsewhere) are removed or refused, never written through.
#include <gtest/gtest.h>

#include <set>

#include "tiny_corpus.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace normlab::train {
namespace {

using testing::slurp;
using testing::spit;
using testing::TempDir;
using testing::tiny_config;
namespace fs = std::filesystem;

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

const std::set<std::string> kRunFiles = {".lock",           "config.json", "metrics.jsonl", "checkpoint.safetensors",
                                         "checkpoint.json", "summary.json"};

TEST(TrainPaths, DotDotAndAbsoluteRunDirectoriesGetExactlyTheirFiles) {
  TempDir tmp("paths");
  fs::create_directories(tmp / "a");
  Trainer(tiny_config(2), tmp / "a" / ".." / "b", {}).run();  // relative .. inside the path
  EXPECT_EQ(entries(tmp.path()), (std::set<std::string>{"a", "b"}));
  EXPECT_TRUE(entries(tmp / "a").empty());
  EXPECT_EQ(entries(tmp / "b"), kRunFiles);

  {
    struct InDirectory {  // restored even when the run throws
      fs::path previous = fs::current_path();
      explicit InDirectory(const fs::path& dir) { fs::current_path(dir); }
      ~InDirectory() { fs::current_path(previous); }
    } in_a(tmp / "a");
    Trainer(tiny_config(2), "../c", {}).run();  // relative to the working directory
  }
  EXPECT_EQ(entries(tmp / "c"), kRunFiles);
  EXPECT_TRUE(entries(tmp / "a").empty());

  const fs::path absolute = fs::absolute(tmp / "d");
  ASSERT_TRUE(absolute.is_absolute());
  Trainer(tiny_config(2), absolute, {}).run();
  EXPECT_EQ(entries(absolute), kRunFiles);
  EXPECT_EQ(entries(tmp.path()), (std::set<std::string>{"a", "b", "c", "d"}));
}

TEST(TrainPaths, PlantedLinksAreNotWrittenThrough) {
  TempDir tmp("paths"), outside("paths_outside");
  spit(outside / "victim", "untouched");
  const fs::path run = tmp / "run";
  RunConfig c = tiny_config(4);
  c.train.checkpoint_every = 1;
  c.train.probe_every = 1;
  Trainer(c, run, {false, 2, nullptr}).run();

  // A resumed run refuses a log that is a link (it is not the run's log: the resume cannot keep its records) and
  // writes nothing through it.
  for (const char* name : {"metrics.jsonl", "probes.jsonl", "probes.csv"}) {
    SCOPED_TRACE(name);
    fs::rename(run / name, run / "kept");
    fs::create_symlink(outside / "victim", run / name);
    try {
      Trainer(c, run, {true, -1, nullptr}).run();
      ADD_FAILURE() << "resumed over a linked log";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name + std::string(" is a symbolic link")), std::string::npos) << e.what();
    }
    fs::remove(run / name);
    fs::rename(run / "kept", run / name);
  }
  // Stale temporary files that are links (one of an older normlab's, one of a writer that was killed) are removed
  // when the run folder is locked, not written through.
  for (const char* name : {"checkpoint.safetensors.tmp", "checkpoint.safetensors.tmp.999999999-0"})
    fs::create_symlink(outside / "victim", run / name);
  Trainer(c, run, {true, -1, nullptr}).run();
  EXPECT_EQ(slurp(outside / "victim"), "untouched");
  for (const char* name : {"checkpoint.safetensors.tmp", "checkpoint.safetensors.tmp.999999999-0"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(run / name))) << name;

  // A fresh run into a directory whose metrics.jsonl is a link refuses it.
  fs::create_directories(tmp / "fresh");
  fs::create_symlink(outside / "victim", tmp / "fresh" / "metrics.jsonl");
  try {
    Trainer(tiny_config(2), tmp / "fresh", {}).run();
    FAIL() << "wrote through a symbolic link";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(outside / "victim"), "untouched");
}

}  // namespace
}  // namespace normlab::train
