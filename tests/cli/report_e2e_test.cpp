// `trainscope report` and `trainscope compare` end to end: the real command on real runs, the
// outputs it writes, the HTML in a headless browser, the gate's exit codes.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_test_util.h"
#include "nlohmann/json.hpp"

using namespace ts::testing;

namespace {

const std::string kSuite = R"(
name = "t"
[[run]]
workload = "resnet50"
preset = "tiny"
batch = 4
iterations = 12
warmup = 1
threads = 1
eval_batches = 0
[[run]]
workload = "transformer"
preset = "tiny"
iterations = 12
warmup = 1
threads = 1
eval_batches = 0
)";

void sql(const std::filesystem::path& db, const std::string& statement) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(h, statement.c_str(), nullptr, nullptr, &err);
  const std::string message = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(h);
  ASSERT_EQ(rc, SQLITE_OK) << statement << ": " << message;
}

// 0: the page loaded, every chart drew, no error; 77: no browser here.
CommandResult browser_check(const std::filesystem::path& html, int min_charts) {
  return run_command("python3 " + std::string(TS_SOURCE_DIR) + "/tests/reports/browser_check.py " + html.string() +
                     " --min-charts " + std::to_string(min_charts));
}

}  // namespace

TEST(Report, ASuiteWithFailedInterruptedAndDeadRunsSaysSoAndStillRenders) {
  TempDir dir;
  const auto db = dir / "r.db";
  std::string repeated = kSuite;
  for (size_t at = 0; (at = repeated.find("eval_batches = 0\n", at)) != std::string::npos; at += 20) {
    repeated.insert(at + 17, "repeats = 3\n");
  }
  run_suite(dir, db, repeated);  // interleaved: odd ids resnet50, even ids transformer
  // Runs ended each way a run can end badly, as the store holds them: failed with its error,
  // interrupted, and one whose writer died (still `running`, its pid gone: lost).
  sql(db, "UPDATE runs SET status = 'failed', error = 'out of memory in conv2d' WHERE id = 1");
  sql(db, "UPDATE runs SET status = 'interrupted' WHERE id = 2");
  sql(db, "UPDATE runs SET status = 'running', ended_at = '', pid = 2147483646, pid_start = 1 WHERE id = 4");
  const auto r = run_trainscope("report " + db.string() + " --html " + (dir / "r.html").string() + " --md " +
                                (dir / "r.md").string() + " --json " + (dir / "r.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string md = read_file(dir / "r.md");
  EXPECT_NE(md.find("## Runs that did not complete"), std::string::npos) << md;
  EXPECT_NE(md.find("out of memory in conv2d"), std::string::npos) << md;
  EXPECT_NE(md.find("| interrupted |"), std::string::npos) << md;
  EXPECT_NE(md.find("| lost |"), std::string::npos) << md;
  EXPECT_NE(md.find("| resnet50/tiny cpu batch 4 | 2/3 |"), std::string::npos) << md;  // the completed runs count
  EXPECT_NE(md.find("| transformer/tiny cpu batch 256 | 1/3 |"), std::string::npos) << md;
  const auto j = nlohmann::json::parse(read_file(dir / "r.json"));
  EXPECT_EQ(j["not_completed"].size(), 3u);
  EXPECT_EQ(j["configurations"].size(), 2u);
  EXPECT_EQ(j["configurations"][0]["completed_runs"], 2);
  EXPECT_EQ(j["configurations"][1]["completed_runs"], 1);
  for (const auto& g : j["configurations"]) {
    EXPECT_GT(g["throughput"]["median"].get<double>(), 0);
    EXPECT_GT(g["peak_bytes"].get<int64_t>(), 0);
  }
  const auto page = browser_check(dir / "r.html", 4);
  if (page.exit_code == 77)
    GTEST_SKIP() << "no headless browser here (scripts/setup installs chromium-headless-shell): " << page.out;
  EXPECT_EQ(page.exit_code, 0) << page.out;
}

TEST(Report, BadInputExitsTwoAndWritesNothing) {
  TempDir dir;
  const auto db = dir / "r.db";
  run_suite(dir, db, kSuite);
  const auto html = (dir / "r.html").string();
  for (const std::string& args :
       {"report " + db.string() + " 99 --html " + html, "report " + db.string() + " nosuchsuite --html " + html,
        "report " + (dir / "missing.db").string() + " --html " + html,
        "report " + db.string() + " --md " + (dir / "r.md").string() + " --html /nonexistent/dir/r.html",
        "report " + db.string() + " --html " + db.string(), "compare 1 99 --db " + db.string(),
        "compare 1 2 --db " + db.string(),  // resnet50 against transformer
        "compare 1 1 --db " + db.string() + " --fail-on-regression -5",
        "compare " + db.string() + " " + (dir / "missing.db").string()}) {
    const auto r = run_trainscope(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("trainscope: "), std::string::npos) << args << "\n" << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(html));
  EXPECT_FALSE(std::filesystem::exists(dir / "r.md"));  // the bad --html was refused before the good --md was written
  const auto r = run_trainscope("compare 1 2 --db " + db.string());
  EXPECT_NE(r.out.find("nothing to compare"), std::string::npos) << r.out;
}

TEST(Compare, TheGateCatchesAPlantedSlowdownAndExactMemoryGrowth) {
  TempDir dir;
  const auto base = dir / "base.db", slow = dir / "slow.db";
  // Builds alternate round by round, as scripts/ci-compare runs them.
  for (int round = 0; round < 2; ++round) {
    run_suite(dir, base, kSuite);
    // Every op twice as long: 60-80% more per iteration, far beyond what a busy machine does to
    // 24 iterations (a 35% plant, about 25% per iteration, was lost once in six beside a CPU hog).
    run_suite(dir, slow, kSuite, "*:1");
  }
  auto r = run_trainscope("compare " + base.string() + " " + slow.string() + " --fail-on-regression 10 --md " +
                          (dir / "c.md").string() + " --html " + (dir / "c.html").string() + " --json " +
                          (dir / "c.json").string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("regression: "), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(dir / "c.json"));
  EXPECT_EQ(j["gate"]["passed"], false);
  ASSERT_EQ(j["pairs"].size(), 2u);
  for (const auto& p : j["pairs"]) {
    EXPECT_EQ(p["metrics"][0]["verdict"], "slower") << p.dump();
    EXPECT_EQ(p["memory"][0]["verdict"], "same") << p.dump();  // a slower build, the same memory
  }
  const auto page = browser_check(dir / "c.html", 1);
  if (page.exit_code != 77) {
    EXPECT_EQ(page.exit_code, 0) << page.out;
  }

  // One byte more activation memory at the peak, in one run of the same build: caught exactly.
  std::filesystem::copy_file(base, dir / "grown.db");
  sql(dir / "grown.db", "UPDATE memory_peak SET bytes = bytes + 1 WHERE category = 'activations' AND run_id IN (1, 3)");
  r = run_trainscope("compare " + base.string() + " " + (dir / "grown.db").string() +
                     " --fail-on-regression 10 --json " + (dir / "m.json").string());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("activations memory at peak grew"), std::string::npos) << r.out;
  r = run_trainscope("compare " + base.string() + " " + (dir / "grown.db").string() +
                     " --fail-on-regression 10 --memory-tolerance 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

// A gate that cannot judge (3 timed iterations a side, fewer than 9) is inconclusive: exit 4,
// never the pass (0) it would otherwise look like.
TEST(Compare, AGateWithTooFewSamplesIsInconclusiveNotAPass) {
  TempDir dir;
  const auto db = dir / "few.db";
  for (int i = 0; i < 2; ++i) {
    const auto r = run_trainscope("run resnet50 --preset tiny --iters 3 --warmup 1 --threads 1 --eval-batches 0 --db " +
                                  db.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  const auto r = run_trainscope("compare 1 2 --db " + db.string() + " --fail-on-regression 10");
  EXPECT_EQ(r.exit_code, 4) << r.out;
  EXPECT_NE(r.out.find("INCONCLUSIVE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("regression gate inconclusive"), std::string::npos) << r.out;
  EXPECT_EQ(run_trainscope("compare 1 2 --db " + db.string()).exit_code, 0);  // no gate asked: nothing to decide
}
