#include <gtest/gtest.h>

#include <fstream>

#include "cli/run_config.h"
#include "cli/suite.h"
#include "cli_test_util.h"
#include "store/reader.h"

using namespace ts;
using namespace ts::testing;

TEST(Suite, ExpandsBatchesAndRepeatsAndRunsThemIntoOneDb) {
  TempDir dir;
  std::ofstream(dir / "s.toml") << R"(
name = "t"
[[run]]
workload = "resnet50"
preset = "tiny"
batch = [2, 4]
iterations = 2
warmup = 0
repeats = 2
threads = 1
eval_batches = 0
)";
  const auto suite = cli::load_suite(dir / "s.toml", dir / "s.db");
  EXPECT_EQ(suite.expand().size(), 4u);
  const auto res = run_trainscope("suite " + (dir / "s.toml").string() + " --db " + (dir / "s.db").string());
  ASSERT_EQ(res.exit_code, 0) << res.out;
  store::Reader r(dir / "s.db");
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].batch_size, 2);
  EXPECT_EQ(runs[3].batch_size, 4);
  for (const auto& run : runs) EXPECT_EQ(run.status, store::RunStatus::completed);
}

TEST(Suite, BadFilesAreRejectedBeforeAnyRun) {
  TempDir dir;
  const std::vector<std::string> bad = {
      "[[run]]\nworkload = \"nosuch\"\n",
      "[[run]]\nworkload = \"resnet50\"\npreset = \"huge\"\n",
      "[[run]]\nworkload = \"resnet50\"\nbatch = [4, 0]\n",
      "[[run]]\nworkload = \"resnet50\"\nitrations = 3\n",
      "[[run]]\nworkload = \"resnet50\"\nlearners = 2\n",
      "[[run]]\nworkload = \"a3c\"\nlearners = 0\n",
      "[[run]]\nworkload = \"a3c\"\nlearners = \"8\"\n",
      "[[run]]\npreset = \"tiny\"\n",
      "name = \"empty\"\n",
      "[[run]\nworkload=",
  };
  for (const auto& text : bad) {
    std::ofstream(dir / "bad.toml") << text;
    EXPECT_THROW(cli::load_suite(dir / "bad.toml", dir / "s.db"), cli::UsageError) << text;
    const auto res = run_trainscope("suite " + (dir / "bad.toml").string() + " --db " + (dir / "s.db").string());
    EXPECT_EQ(res.exit_code, 2) << text << res.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "s.db"));
  EXPECT_EQ(run_trainscope("suite " + (dir / "missing.toml").string()).exit_code, 2);
}

TEST(Suite, DefaultSuiteParses) {
  TempDir dir;
  const auto suite = cli::load_suite(std::filesystem::path(TS_SOURCE_DIR) / "suites/default.toml", dir / "d.db");
  EXPECT_GE(suite.expand().size(), 2u);
}

TEST(Suite, A3cScalingSuiteSetsTheLearners) {
  TempDir dir;
  const auto suite = cli::load_suite(std::filesystem::path(TS_SOURCE_DIR) / "suites/a3c_scaling.toml", dir / "d.db");
  std::vector<int64_t> learners;
  for (const auto& c : suite.expand()) learners.push_back(c.learners.value_or(0));
  EXPECT_EQ(learners, (std::vector<int64_t>{1, 2, 8}));
}
