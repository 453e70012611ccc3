// The logs a resumed run reads back (io/step_log.h): a last line cut short is left out, anything else that is not
// a line with a step, or steps that go back, is refused naming the file and the line; a resume keeps the lines up to
// its checkpoint.
#include "io/step_log.h"

#include <gtest/gtest.h>

#include "io_test_util.h"

namespace normlab::io {
namespace {

using testing::expect_error;
using testing::slurp;
using testing::TempDir;

std::vector<int> steps(const StepLog& log) {
  std::vector<int> out;
  for (const StepLine& l : log.lines) out.push_back(l.step);
  return out;
}

TEST(IoStepLog, ALastLineCutShortIsLeftOut) {
  const std::string whole = "{\"step\":1,\"type\":\"train\"}\n{\"step\":2,\"type\":\"train\"}\n";
  EXPECT_EQ(steps(parse_step_log(whole + "{\"step\":3,\"ty", "m.jsonl", StepLogFormat::jsonl)),
            (std::vector<int>{1, 2}));
  // Cut just before its newline: still not known to be whole, so left out too (its step comes after any checkpoint).
  EXPECT_EQ(steps(parse_step_log(whole + "{\"step\":3}", "m.jsonl", StepLogFormat::jsonl)), (std::vector<int>{1, 2}));
  const StepLog csv = parse_step_log("step,family\n1,loss\n2,loss\n3,lo", "p.csv", StepLogFormat::csv);
  EXPECT_EQ(csv.header, "step,family");
  EXPECT_FALSE(parse_step_log("", "p.csv", StepLogFormat::csv).header) << "an empty file has no header yet";
  EXPECT_EQ(steps(csv), (std::vector<int>{1, 2}));
  EXPECT_TRUE(parse_step_log("", "m.jsonl", StepLogFormat::jsonl).lines.empty());
}

TEST(IoStepLog, DamagedLinesAreRefusedNamingFileAndLine) {
  expect_error(
      [] { parse_step_log("{\"step\":1}\n{\"step\":\"x\"}\n{\"step\":3}\n", "m.jsonl", StepLogFormat::jsonl); },
      {"m.jsonl line 2", "\"step\": \"x\"", "not a whole number", "damaged"});
  expect_error([] { parse_step_log("{\"step\":1}\n{\"ste\n{\"step\":3}\n", "m.jsonl", StepLogFormat::jsonl); },
               {"m.jsonl line 2", "not a JSON object"});
  expect_error([] { parse_step_log("{\"loss\":1}\n", "m.jsonl", StepLogFormat::jsonl); },
               {"m.jsonl line 1", "no \"step\""});
  expect_error([] { parse_step_log("[1]\n", "m.jsonl", StepLogFormat::jsonl); }, {"line 1", "not a JSON object"});
  expect_error([] { parse_step_log("{\"step\":-2}\n", "m.jsonl", StepLogFormat::jsonl); }, {"line 1", "-2"});
  expect_error([] { parse_step_log("{\"step\":1e3}\n", "m.jsonl", StepLogFormat::jsonl); }, {"line 1"});
  expect_error([] { parse_step_log("h\n1,a\nx,b\n", "p.csv", StepLogFormat::csv); }, {"p.csv line 3", "'x'"});
}

// Two writers interleave their steps: the log is refused, not silently cut.
TEST(IoStepLog, StepsThatGoBackAreRefused) {
  expect_error([] { parse_step_log("{\"step\":1}\n{\"step\":3}\n{\"step\":2}\n", "m.jsonl", StepLogFormat::jsonl); },
               {"m.jsonl line 3", "step 2 after step 3", "two processes"});
  // The same step twice (a train and an eval record) is fine.
  EXPECT_EQ(steps(parse_step_log("{\"step\":2}\n{\"step\":2}\n", "m.jsonl", StepLogFormat::jsonl)),
            (std::vector<int>{2, 2}));
}

TEST(IoStepLog, RequiredStepsAndKeepingUpToAStep) {
  TempDir dir;
  const auto file = dir / "metrics.jsonl";
  testing::spit(file,
                "{\"step\":1,\"type\":\"train\"}\n{\"step\":2,\"type\":\"eval\"}\n{\"step\":3,\"type\":\"train\"}\n"
                "{\"step\":4,\"type\":\"train\"}\n{\"step\":5,\"type\":\"tr");
  const StepLog log = read_step_log(file, StepLogFormat::jsonl);
  const auto train = [](const StepLine& l) { return l.record["type"] == "train"; };
  require_steps(log, file, {1, 3}, "train record", train);
  expect_error(
      [&] {
        require_steps(log, file, {1, 2, 3}, "train record", train);
      },
      {file.string(), "lacks the train record of step 2", "missing"});
  expect_error([&] { require_steps(log, file, {6, 7}, "train record"); }, {"train records of steps 6, 7"});
  keep_steps_up_to(file, log, 3);
  EXPECT_EQ(slurp(file),
            "{\"step\":1,\"type\":\"train\"}\n{\"step\":2,\"type\":\"eval\"}\n{\"step\":3,\"type\":\"train\"}\n");
  keep_steps_up_to(dir / "absent.jsonl", log, 3);
  EXPECT_FALSE(std::filesystem::exists(dir / "absent.jsonl"));
  EXPECT_TRUE(read_step_log(dir / "absent.jsonl", StepLogFormat::jsonl).lines.empty());
}

}  // namespace
}  // namespace normlab::io
