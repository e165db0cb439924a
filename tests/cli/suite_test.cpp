#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/run_config.h"
#include "cli/suite.h"
#include "cli_test_util.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "store/reader.h"
#include "workloads/workload.h"

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
  EXPECT_EQ(suite.run_count(), 4u);
  const auto res = run_trainscope("suite " + (dir / "s.toml").string() + " --db " + (dir / "s.db").string());
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("[1/4] resnet50/tiny batch 2"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("[4/4] resnet50/tiny batch 4"), std::string::npos) << res.out;
  // After the summaries, the closing table (issue 38): one row per run, with its status and rate.
  const auto table = res.out.find("suite t: 4 runs\n");
  ASSERT_NE(table, std::string::npos) << res.out;
  std::istringstream rows(res.out.substr(table));
  std::string line;
  std::getline(rows, line);  // the heading
  std::getline(rows, line);  // the columns
  EXPECT_NE(line.find("sustained rate"), std::string::npos) << line;
  for (int id = 1; id <= 4; ++id) {
    ASSERT_TRUE(std::getline(rows, line)) << res.out;
    EXPECT_EQ(line.find(fmt::format("{:>4}  ", id)), 0u) << line;
    const std::string device_batch = fmt::format("{:<6} {:>6} ", "cpu", id % 2 ? 2 : 4);  // interleaved
    for (const std::string part : {"resnet50", "tiny", device_batch.c_str(), "completed", "images/s"})
      EXPECT_NE(line.find(part), std::string::npos) << part << " missing from: " << line;
  }
  store::Reader r(dir / "s.db");
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 4u);
  // Interleaved: batch 2, batch 4, then their second repeats; each run says which it is.
  const std::vector<int64_t> batches = {2, 4, 2, 4}, repeats = {1, 1, 2, 2};
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].status, store::RunStatus::completed);
    EXPECT_EQ(runs[i].batch_size, batches[i]) << i;
    const auto tag = nlohmann::json::parse(runs[i].config_json).at("suite");
    EXPECT_EQ(tag.at("name"), "t");
    EXPECT_EQ(tag.at("entry"), 1);
    EXPECT_EQ(tag.at("repeat"), repeats[i]) << i;
  }
}

// An entry without a batch trains with its preset's, and its label says which (issue 38: it said
// "batch default").
TEST(Suite, LabelSaysTheResolvedBatch) {
  TempDir dir;
  std::ofstream(dir / "s.toml") << R"(
[[run]]
workload = "resnet50"
preset = "tiny"
iterations = 1
warmup = 0
threads = 1
eval_batches = 0
)";
  const auto res = run_trainscope("suite " + (dir / "s.toml").string() + " --db " + (dir / "s.db").string());
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("[1/1] resnet50/tiny batch 4"), std::string::npos) << res.out;
  EXPECT_EQ(res.out.find("batch default"), std::string::npos) << res.out;
  EXPECT_EQ(store::Reader(dir / "s.db").runs().at(0).batch_size, 4);
}

// --json prints one document, the summaries, and nothing after it.
TEST(Suite, JsonIsOneDocument) {
  TempDir dir;
  std::ofstream(dir / "s.toml") << R"(
[[run]]
workload = "resnet50"
preset = "tiny"
iterations = 1
warmup = 0
threads = 1
eval_batches = 0
repeats = 2
)";
  const auto res =
      run_trainscope_split("suite " + (dir / "s.toml").string() + " --json --db " + (dir / "s.db").string());
  ASSERT_EQ(res.exit_code, 0) << res.err;
  nlohmann::json doc;
  ASSERT_NO_THROW(doc = nlohmann::json::parse(res.out)) << res.out;
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[1].at("run_id"), 2);
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
  EXPECT_GE(suite.run_count(), 2u);
}

// scripts/run's PyTorch suite: each entry a PyTorch reference of a default-suite configuration,
// so that the report pairs them (same workload, preset and batch).
TEST(Suite, FrameworksSuitePairsWithTheDefaultSuite) {
  TempDir dir;
  const auto frameworks =
      cli::load_suite(std::filesystem::path(TS_SOURCE_DIR) / "suites/frameworks.toml", dir / "d.db");
  const auto defaults = cli::load_suite(std::filesystem::path(TS_SOURCE_DIR) / "suites/default.toml", dir / "d.db");
  ASSERT_EQ(frameworks.run_count(), 7u);
  for (uint64_t i = 0; i < frameworks.run_count(); ++i) {
    const auto c = frameworks.run_at(i);
    EXPECT_EQ(c.framework, "pytorch") << c.workload;
    bool paired = false;
    for (uint64_t k = 0; k < defaults.run_count(); ++k) {
      const auto d = defaults.run_at(k);
      const auto* spec = workloads::find_workload(c.workload);
      ASSERT_NE(spec, nullptr) << c.workload;
      paired = paired || (d.framework == "trainscope" && d.workload == c.workload && d.preset == c.preset &&
                          d.nproc == 1 && spec->batch_of(d.preset, d.batch) == spec->batch_of(c.preset, c.batch));
    }
    EXPECT_TRUE(paired) << c.workload << " has no trainscope run of its configuration in the default suite";
  }
}

TEST(Suite, A3cScalingSuiteSetsTheLearners) {
  TempDir dir;
  const auto suite = cli::load_suite(std::filesystem::path(TS_SOURCE_DIR) / "suites/a3c_scaling.toml", dir / "d.db");
  std::vector<int64_t> learners;
  for (uint64_t i = 0; i < suite.run_count(); ++i) learners.push_back(suite.run_at(i).learners.value_or(0));
  EXPECT_EQ(learners, (std::vector<int64_t>{1, 2, 8}));
}

namespace {

// The UsageError message load_suite gives for `text` (a file shown as "bad.toml"); "" when it loads.
std::string refusal(const TempDir& dir, const std::string& text) {
  try {
    cli::load_suite(text, "bad.toml", dir / "s.db");
  } catch (const cli::UsageError& e) {
    return e.what();
  }
  return "";
}

struct BadCase {
  std::string text;
  std::string expected;  // a part of the message: "bad.toml:LINE: run #N: key 'K' ..." or the like
};

void expect_refusals(const std::vector<BadCase>& cases) {
  TempDir dir;
  for (const auto& c : cases) {
    const std::string message = refusal(dir, c.text);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << "file:\n"
        << c.text << "\nexpected a message containing: " << c.expected << "\ngot: " << message;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "s.db"));
}

const std::string kRun = "[[run]]\nworkload = \"resnet50\"\n";  // lines 1-2
const std::string kA3c = "[[run]]\nworkload = \"a3c\"\n";

}  // namespace

TEST(Suite, RepeatsInterleaveEntriesRoundByRoundUnlessAskedNotTo) {
  const std::string text =
      kRun + "batch = [1, 2]\nrepeats = 3\n" + kRun + "seed = 7\n" + kRun + "seed = 9\nrepeats = 2\n";
  TempDir dir;
  const auto interleaved = cli::load_suite(text, "i.toml", dir / "s.db");
  // (entry, batch or seed, repeat): round 1 has all four runs, round 2 loses the second entry,
  // round 3 keeps only the first entry's two batches.
  struct Expect {
    int64_t entry, key, repeat;
  };
  const std::vector<Expect> order = {{1, 1, 1}, {1, 2, 1}, {2, 7, 1}, {3, 9, 1}, {1, 1, 2},
                                     {1, 2, 2}, {3, 9, 2}, {1, 1, 3}, {1, 2, 3}};
  ASSERT_EQ(interleaved.run_count(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const auto c = interleaved.run_at(i);
    EXPECT_EQ(c.suite.name, "i");
    EXPECT_EQ(c.suite.entry, order[i].entry) << i;
    EXPECT_EQ(c.suite.repeat, order[i].repeat) << i;
    EXPECT_EQ(order[i].entry == 1 ? c.batch.value_or(0) : static_cast<int64_t>(c.seed), order[i].key) << i;
  }
  EXPECT_THROW(interleaved.run_at(order.size()), std::out_of_range);
  const auto grouped = cli::load_suite("interleave = false\n" + text, "g.toml", dir / "s.db");
  const std::vector<Expect> grouped_order = {{1, 1, 1}, {1, 1, 2}, {1, 1, 3}, {1, 2, 1}, {1, 2, 2},
                                             {1, 2, 3}, {2, 7, 1}, {3, 9, 1}, {3, 9, 2}};
  for (size_t i = 0; i < grouped_order.size(); ++i) {
    const auto c = grouped.run_at(i);
    EXPECT_EQ(c.suite.entry, grouped_order[i].entry) << i;
    EXPECT_EQ(c.suite.repeat, grouped_order[i].repeat) << i;
  }
  EXPECT_THROW((void)cli::load_suite("interleave = 1\n" + text, "b.toml", dir / "s.db"), cli::UsageError);
}

TEST(Suite, WrongTypesAreRefusedNamingFileLineAndKey) {
  TempDir dir;
  EXPECT_EQ(refusal(dir, kRun + "iterations = \"ten\"\n"),
            "bad.toml:3: run #1: key 'iterations' must be an integer in 1..1000000000 (got string \"ten\")");
  expect_refusals({
      {"[[run]]\nworkload = 5\n", "bad.toml:2: run #1: key 'workload' must be a string (got integer 5)"},
      {kRun + "preset = true\n", "bad.toml:3: run #1: key 'preset' must be a string (got boolean true)"},
      {kRun + "device = [\"cpu\"]\n", "bad.toml:3: run #1: key 'device' must be a string (got an array)"},
      {kRun + "data = 1.5\n", "bad.toml:3: run #1: key 'data' must be a string (got float 1.5)"},
      {kRun + "trace = \"yes\"\n", "bad.toml:3: run #1: key 'trace' must be a boolean"},
      {kRun + "trace = 1\n", "bad.toml:3: run #1: key 'trace' must be a boolean (true or false) (got integer 1)"},
      {kRun + "warmup = true\n", "bad.toml:3: run #1: key 'warmup' must be an integer in 0..1000000000 (got boolean"},
      {kRun + "seed = 1979-05-27\n", "bad.toml:3: run #1: key 'seed' must be a non-negative integer (got a date)"},
      {kRun + "batch = \"4\"\n", "bad.toml:3: run #1: key 'batch' must be an integer in 1..2147483647 or a non-empty "
                                 "array of them (got string \"4\")"},
      {kRun + "batch = [\n  4,\n  \"8\",\n]\n", "bad.toml:5: run #1: key 'batch' element 2 must be an integer"},
      {kRun + "batch = []\n", "bad.toml:3: run #1: key 'batch' must be an integer in 1..2147483647 or a non-empty"},
      {kRun + "batch = { size = 4 }\n", "bad.toml:3: run #1: key 'batch' must be"},
      {kA3c + "learners = \"8\"\n", "bad.toml:3: run #1: key 'learners' must be an integer in 1..4096 (got string"},
      {"name = 5\n" + kRun, "bad.toml:1: key 'name' must be a string (got integer 5)"},
      // What was written is shown on one line: control bytes escaped, long text cut.
      {kRun + "iterations = \"a\\tb\"\n", "(got string \"a\\x09b\")"},
      {kRun + "iterations = \"" + std::string(50, 'x') + "\"\n", "(got string \"" + std::string(40, 'x') + "...\")"},
  });
}

TEST(Suite, FloatsAreNeverTakenForIntegers) {
  expect_refusals({
      {kRun + "iterations = 2.0\n",
       "bad.toml:3: run #1: key 'iterations' must be an integer in 1..1000000000 (got float 2.0)"},
      {kRun + "warmup = 0.0\n", "key 'warmup' must be an integer in 0..1000000000 (got float 0.0)"},
      {kRun + "threads = 1.5\n", "key 'threads' must be an integer in 0..1024 (got float 1.5)"},
      {kRun + "seed = 1e3\n", "key 'seed' must be a non-negative integer (got float 1000.0)"},
      {kRun + "repeats = 2.0\n", "key 'repeats' must be an integer in 1..1000000 (got float 2.0)"},
      {kRun + "eval_batches = 1.0\n", "key 'eval_batches' must be an integer in 0..1000000 (got float 1.0)"},
      {kRun + "batch = 4.0\n",
       "key 'batch' must be an integer in 1..2147483647 or a non-empty array of them (got float 4.0)"},
      {kRun + "batch = [2, 4.0]\n", "key 'batch' element 2 must be an integer in 1..2147483647 (got float 4.0)"},
      {kA3c + "learners = 2.0\n", "key 'learners' must be an integer in 1..4096 (got float 2.0)"},
  });
}

TEST(Suite, OutOfRangeIntegersAreRefused) {
  expect_refusals({
      // iterations + warmup would overflow int64 in the run loop.
      {kRun + "iterations = 9223372036854775807\n",
       "bad.toml:3: run #1: key 'iterations' must be an integer in 1..1000000000 (got integer 9223372036854775807)"},
      {kRun + "iterations = 0\n", "key 'iterations' must be an integer in 1..1000000000 (got integer 0)"},
      {kRun + "iterations = 1000000001\n", "key 'iterations' must be an integer in 1..1000000000"},
      {kRun + "warmup = -1\n", "key 'warmup' must be an integer in 0..1000000000 (got integer -1)"},
      {kRun + "warmup = 1000000001\n", "key 'warmup' must be an integer in 0..1000000000"},
      {kRun + "repeats = 0\n", "key 'repeats' must be an integer in 1..1000000 (got integer 0)"},
      {kRun + "repeats = 1000001\n", "key 'repeats' must be an integer in 1..1000000"},
      {kRun + "threads = -1\n", "key 'threads' must be an integer in 0..1024 (got integer -1)"},
      {kRun + "threads = 1025\n", "key 'threads' must be an integer in 0..1024"},
      {kRun + "eval_batches = -1\n", "key 'eval_batches' must be an integer in 0..1000000"},
      {kRun + "eval_batches = 1000001\n", "key 'eval_batches' must be an integer in 0..1000000"},
      {kRun + "batch = 0\n",
       "key 'batch' must be an integer in 1..2147483647 or a non-empty array of them (got integer 0)"},
      {kRun + "batch = 2147483648\n", "key 'batch' must be an integer in 1..2147483647"},
      {kRun + "batch = [4, -2]\n", "key 'batch' element 2 must be an integer in 1..2147483647 (got integer -2)"},
      // Once cast to uint64, -1 would have seeded with 2^64 - 1.
      {kRun + "seed = -1\n", "key 'seed' must be a non-negative integer (got integer -1)"},
      {kA3c + "learners = 0\n", "key 'learners' must be an integer in 1..4096 (got integer 0)"},
      {kA3c + "learners = 4097\n", "key 'learners' must be an integer in 1..4096"},
  });
}

TEST(Suite, TheRangeLimitsThemselvesAreAccepted) {
  TempDir dir;
  const auto suite = cli::load_suite(kRun + "iterations = 1000000000\nwarmup = 1000000000\nrepeats = 1000000\n"
                                            "eval_batches = 1000000\nbatch = 2147483647\nseed = 9223372036854775807\n"
                                            "threads = 0\n",
                                     "limits.toml", dir / "s.db");
  ASSERT_EQ(suite.run_count(), 1'000'000u);
  const auto c = suite.run_at(999'999);
  EXPECT_EQ(c.iterations, 1'000'000'000);
  EXPECT_EQ(c.warmup, 1'000'000'000);
  EXPECT_EQ(c.eval_batches, 1'000'000);
  EXPECT_EQ(c.batch, std::optional<int64_t>(2147483647));
  EXPECT_EQ(c.seed, uint64_t{9223372036854775807});
  EXPECT_EQ(c.threads, 0);
  const auto a3c = cli::load_suite(kA3c + "learners = 4096\n", "a3c.toml", dir / "s.db");
  EXPECT_EQ(a3c.run_at(0).learners, std::optional<int64_t>(4096));
}

TEST(Suite, UnknownKeysAndNestedTablesAreRefusedAtTheirLine) {
  expect_refusals({
      {kRun + "\n[[run]]\nworkload = \"resnet50\"\niterations = 2\nitrations = 3\n",
       "bad.toml:7: run #2: unknown key 'itrations' (known: workload, preset"},
      {kRun + "[run.extra]\nx = 1\n", "bad.toml:3: run #1: unknown key 'extra'"},
      {kRun + "[[run.sub]]\nx = 1\n", "bad.toml:3: run #1: unknown key 'sub'"},
      {kRun + "extra.x = 1\n", "bad.toml:3: run #1: unknown key 'extra'"},
      {kRun + "[run.batch]\nsize = 4\n", "run #1: key 'batch' must be an integer in 1..2147483647 or a non-empty array "
                                         "of them (got a table)"},
  });
}

TEST(Suite, KeysAboveTheFirstRunAreRefused) {
  expect_refusals({
      // These once vanished silently: the runs took the default 20 iterations.
      {"name = \"t\"\niterations = 5\n" + kRun,
       "bad.toml:2: unknown key 'iterations' (only 'name' and 'interleave' may appear above the first [[run]]"},
      {"[defaults]\niterations = 5\n" + kRun, "bad.toml:1: unknown key 'defaults'"},
  });
}

TEST(Suite, RunMustBeAnArrayOfTables) {
  expect_refusals({
      {"name = \"t\"\n[run]\nworkload = \"resnet50\"\n",
       "bad.toml:2: 'run' must be an array of tables: write [[run]], not [run]"},
      {"run = 5\n", "bad.toml:1: key 'run' must be [[run]] tables (got integer 5)"},
      {"run = [\"resnet50\"]\n", "bad.toml:1: run #1: must be a table (got string \"resnet50\")"},
      {"run = []\n", "bad.toml: no [[run]] entries"},
  });
}

TEST(Suite, ValidateErrorsNameTheEntryAndItsLine) {
  expect_refusals({
      {kRun + "\n[[run]]\nworkload = \"nosuch\"\n", "bad.toml:4: run #2: unknown workload 'nosuch'"},
      {"[[run]]\npreset = \"tiny\"\n", "bad.toml:1: run #1: key 'workload' is required"},
  });
}

TEST(Suite, ABadLaterEntryStopsTheSuiteBeforeAnyRun) {
  TempDir dir;
  std::ofstream(dir / "s.toml") << kRun << "iterations = 1\nwarmup = 0\neval_batches = 0\n\n"
                                << kRun << "iterations = \"ten\"\n";
  const auto res = run_trainscope("suite " + (dir / "s.toml").string() + " --db " + (dir / "s.db").string());
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_NE(res.out.find((dir / "s.toml").string() + ":9: run #2: key 'iterations'"), std::string::npos) << res.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "s.db"));
}

TEST(Suite, HugeRepeatsAreCountedWithoutBuildingEveryRun) {
  // 100 entries x 10 batches x a million repeats: a billion runs, far more RunConfigs than memory
  // holds, so this only passes while runs are made one at a time.
  std::string text = "interleave = false\n";
  for (int entry = 0; entry < 100; ++entry) {
    text += kRun + "batch = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nrepeats = 1000000\nseed = " + std::to_string(entry) + "\n";
  }
  TempDir dir;
  const auto suite = cli::load_suite(text, "huge.toml", dir / "s.db");
  ASSERT_EQ(suite.run_count(), 1'000'000'000u);
  EXPECT_EQ(suite.run_at(0).batch, std::optional<int64_t>(1));
  EXPECT_EQ(suite.run_at(999'999).batch, std::optional<int64_t>(1));
  EXPECT_EQ(suite.run_at(1'000'000).batch, std::optional<int64_t>(2));
  EXPECT_EQ(suite.run_at(10'000'000).seed, 1u);  // the second entry's first run
  const auto last = suite.run_at(999'999'999);
  EXPECT_EQ(last.batch, std::optional<int64_t>(10));
  EXPECT_EQ(last.seed, 99u);
  EXPECT_THROW(suite.run_at(1'000'000'000), std::out_of_range);
  EXPECT_FALSE(std::filesystem::exists(dir / "s.db"));
}

TEST(Suite, HugeInterleavedRepeatsAreFoundWithoutWalkingEveryRound) {
  // 100 entries with different repeat counts (up to a million): finding a run walks the stretches
  // of equal rounds, not the rounds.
  std::string text;
  for (int entry = 0; entry < 100; ++entry) {
    text += kRun + "batch = [1, 2]\nrepeats = " + std::to_string(10'000 * (entry + 1)) +
            "\nseed = " + std::to_string(entry) + "\n";
  }
  TempDir dir;
  const auto suite = cli::load_suite(text, "huge.toml", dir / "s.db");
  ASSERT_EQ(suite.run_count(), 2u * 10'000 * 5050);
  EXPECT_EQ(suite.run_at(0).seed, 0u);
  EXPECT_EQ(suite.run_at(199).seed, 99u);
  EXPECT_EQ(suite.run_at(200).suite.repeat, 2);
  const auto last = suite.run_at(suite.run_count() - 1);  // only the last entry has round 1,000,000
  EXPECT_EQ(last.seed, 99u);
  EXPECT_EQ(last.suite.repeat, 1'000'000);
  EXPECT_EQ(last.batch, std::optional<int64_t>(2));
  // The first run after round 10,000: the first entry has dropped out.
  const auto after = suite.run_at(200u * 10'000);
  EXPECT_EQ(after.seed, 1u);
  EXPECT_EQ(after.suite.repeat, 10'001);
}

// Found by fuzz/suite_fuzzer.cpp: toml++ 3.3 asserts, or has undefined behaviour, on these
// instead of reporting an error, so load_suite refuses them before toml++ sees the text.
TEST(Suite, InputsTomlPlusPlusMishandlesAreRefusedBeforeItSeesThem) {
  expect_refusals({
      // A table header without a name.
      {"[[\nworkload = \"resnet50\"\n", "bad.toml:1: a table header needs a name after '[' or '[[' (e.g. [[run]])"},
      {kRun + "[=\n", "bad.toml:3: a table header needs a name after '[' or '[['"},
      {kRun + "trace = true # a comment\n[ #\n", "bad.toml:4: a table header needs a name"},
      {kRun + "batch = [\n  2,\n]\n[[\t\n", "bad.toml:6: a table header needs a name"},
      // A non-ASCII character outside strings and comments, or after a backslash in a """ string.
      {"\xc3\xa9 = 1\n" + kRun, "bad.toml:1: a non-ASCII character outside a string or comment"},
      {kRun + "preset = tiny\xc3\xa9\n", "bad.toml:3: a non-ASCII character outside a string or comment"},
      {kRun + "iterations = 2'\xc3\xa9'\n", "bad.toml:3: a non-ASCII character outside a string or comment"},
      {kRun + "iterations = 9{\"\xc3\xa9\"}\n", "bad.toml:3: a non-ASCII character outside a string or comment"},
      // A '}' where an array expects a value.
      {kRun + "batch = [}\n", "bad.toml:3: a '}' where an array needs a value or ']'"},
      {kRun + "batch = [\n  1, # one\n  }\n", "bad.toml:5: a '}' where an array needs a value or ']'"},
      // A value, a space, one digit: toml++ takes it for a date and a time.
      {kRun + "seed = 1979-05-27 9\n", "bad.toml:3: a stray digit after a value"},
      {kRun + "batch = [1, 2 3]\n", "bad.toml:3: a stray digit after a value"},
      {kRun + "data = \"\"\"\\\n  \xc2\xa7\"\"\"\n", "bad.toml:4: a non-ASCII character after '\\' in a \"\"\" string"},
  });
  TempDir dir;
  // An error before the hazard is reported as toml++ finds it.
  const std::string earlier = refusal(dir, "x = \n[[\n");
  EXPECT_EQ(earlier.rfind("bad.toml:1: ", 0), 0u) << earlier;
  EXPECT_EQ(earlier.find("table header needs a name"), std::string::npos) << earlier;
  // Valid TOML is still read: '[' then a line break in strings, comments and array values; non-ASCII
  // text in strings and comments; a byte-order mark.
  EXPECT_EQ(refusal(dir, kRun + "batch = [ # sizes [\n  2,\n  [\n]]\n"),
            "bad.toml:5: run #1: key 'batch' element 2 must be an integer in 1..2147483647 (got an array)");
  EXPECT_EQ(refusal(dir, kRun + "batch = [\n  2, # [\n  4,\n]\n# [ caf\xc3\xa9\n"), "");
  EXPECT_EQ(refusal(dir, "\xEF\xBB\xBF" + kRun), "");
  for (const std::string data : {"\"\"\"\n[\n\"\"\"", "'''\n[[\n'''''", "\"\\\"[\"", "\"caf\xc3\xa9\"",
                                 "'''\\\n\xc2\xa7'''", "\"\"\"caf\xc3\xa9\"\"\""}) {
    const std::string message = refusal(dir, kRun + "data = " + data + "\n");
    EXPECT_NE(message.find("unknown data source"), std::string::npos) << data << "\n" << message;
  }
}

TEST(Suite, DistributedKeysSetTheRunsLaunchAndDataParallelism) {
  TempDir dir;
  const auto suite =
      cli::load_suite(kRun + "nproc = 4\nmca = [\"btl_tcp_links=4\", \"a=b=c\"]\nbucket_mb = 5\n"
                             "partition_mb = 0.5\noverlap = false\npriority = true\n"
                             "bucket_order = \"reverse_registration\"\n"
                             "[[run]]\nworkload = \"transformer\"\nhosts = \"127.0.0.1:2\"\nmca = \"x=1\"\n",
                      "d.toml", dir / "s.db");
  ASSERT_EQ(suite.entries.size(), 2u);
  const auto& a = suite.entries[0].config;
  EXPECT_EQ(a.nproc, 4);
  ASSERT_EQ(a.mca.size(), 2u);
  EXPECT_EQ(a.mca[0], std::make_pair(std::string("btl_tcp_links"), std::string("4")));
  EXPECT_EQ(a.mca[1], std::make_pair(std::string("a"), std::string("b=c")));
  EXPECT_DOUBLE_EQ(a.data_parallel.bucket_mb, 5.0);
  EXPECT_DOUBLE_EQ(a.data_parallel.partition_mb, 0.5);
  EXPECT_FALSE(a.data_parallel.overlap);
  EXPECT_TRUE(a.data_parallel.priority);
  EXPECT_EQ(a.data_parallel.order, distributed::BucketOrder::reverse_registration);
  const auto& b = suite.entries[1].config;
  EXPECT_EQ(b.nproc, 0) << "hosts without nproc: one rank per slot";
  EXPECT_EQ(b.hosts, "127.0.0.1:2");
  EXPECT_TRUE(b.data_parallel.overlap);
  EXPECT_EQ(b.data_parallel.order, distributed::BucketOrder::arrival);
}

TEST(Suite, BadDistributedKeysAreRefused) {
  expect_refusals({
      {kRun + "nproc = 0\n", "bad.toml:3: run #1: key 'nproc' must be an integer in 1..4096 (got integer 0)"},
      {kRun + "nproc = 2.0\n", "key 'nproc' must be an integer"},
      {kRun + "bucket_mb = 0\n",
       "bad.toml:3: run #1: key 'bucket_mb' must be a number from 0.001 to 4096 (got integer 0)"},
      {kRun + "bucket_mb = \"25\"\n", "key 'bucket_mb' must be a number"},
      {kRun + "bucket_order = \"random\"\n", "key 'bucket_order' must be \"arrival\" or \"reverse_registration\""},
      {kRun + "overlap = 1\n", "key 'overlap' must be a boolean"},
      {kRun + "mca = [\"novalue\"]\n", "key 'mca' takes \"NAME=VALUE\" strings"},
      {kRun + "mca = [1]\n", "key 'mca' element 1 must be a string"},
      {kRun + "hosts = \"127.0.0.1\"\nhostfile = \"h\"\n", "give --hosts or --hostfile, not both"},
      {kA3c + "nproc = 2\n", "a3c's actor-learners are asynchronous: run it across ranks with --strategy ps"},
  });
}

TEST(Suite, ParameterServerKeysSetTheStrategy) {
  TempDir dir;
  const auto suite =
      cli::load_suite(kRun +
                          "strategy = \"ps\"\nnproc = 4\nservers = 2\nstaleness = 3\nchunk_mb = 0.5\n"
                          "priority = true\n" +
                          kRun +
                          "strategy = \"ps\"\nnproc = 2\nserver_hosts = \"127.0.0.1:2\"\nservers = 2\n"
                          "ps_mode = \"eager\"\n" +
                          kRun + "strategy = \"ps\"\nnproc = 1\ndedicated_servers = true\nps_mode = \"sync\"\n" + kRun +
                          "strategy = \"allreduce\"\nnproc = 2\nbucket_mb = 5\n",
                      "ps.toml", dir / "s.db");
  ASSERT_EQ(suite.entries.size(), 4u);
  using Strategy = cli::RunConfig::Strategy;
  const auto& a = suite.entries[0].config;
  EXPECT_EQ(a.strategy, Strategy::ps);
  EXPECT_EQ(a.ps.servers, 2);
  EXPECT_FALSE(a.ps.dedicated);
  EXPECT_EQ(a.ps.mode, distributed::ps::PsMode::bounded) << "a staleness alone asks for bounded staleness";
  EXPECT_EQ(a.ps.staleness, 3);
  EXPECT_DOUBLE_EQ(a.ps.chunk_mb, 0.5);
  EXPECT_TRUE(a.ps.priority) << "priority also orders the servers' keys";
  const auto& b = suite.entries[1].config;
  EXPECT_TRUE(b.ps.dedicated) << "server_hosts implies dedicated servers";
  EXPECT_EQ(b.ps.server_hosts, "127.0.0.1:2");
  EXPECT_EQ(b.ps.mode, distributed::ps::PsMode::eager);
  const auto& c = suite.entries[2].config;
  EXPECT_EQ(c.strategy, Strategy::ps);
  EXPECT_TRUE(c.ps.dedicated);
  EXPECT_TRUE(cli::launches_ranks(c)) << "one worker and a dedicated server are two ranks";
  const auto& d = suite.entries[3].config;
  EXPECT_EQ(d.strategy, Strategy::allreduce);
  EXPECT_DOUBLE_EQ(d.data_parallel.bucket_mb, 5.0);
  EXPECT_EQ(d.ps.servers, 1);
}

TEST(Suite, BadParameterServerKeysAreRefused) {
  const std::string ps = "strategy = \"ps\"\nnproc = 2\n";  // lines 3-4
  expect_refusals({
      {kRun + "strategy = \"ring\"\n", "bad.toml:1: run #1: key 'strategy' must be allreduce or ps (got 'ring')"},
      {kRun + "strategy = 1\n", "bad.toml:3: run #1: key 'strategy' must be a string (got integer 1)"},
      {kRun + ps + "servers = 0\n", "bad.toml:5: run #1: key 'servers' must be an integer in 1..4096 (got integer 0)"},
      {kRun + ps + "servers = 3\n",
       "bad.toml:1: run #1: --servers 3 asks for more co-located servers than there are workers"},
      {kRun + ps + "staleness = -1\n", "key 'staleness' must be an integer in 0..1000000 (got integer -1)"},
      {kRun + ps + "staleness = 1.5\n", "key 'staleness' must be an integer"},
      {kRun + ps + "ps_mode = \"bogus\"\n", "key 'ps_mode' must be sync, async, bounded or eager (got 'bogus')"},
      {kRun + ps + "staleness = 2\nps_mode = \"async\"\n",
       "key 'staleness' 2 applies to ps_mode = \"bounded\" only (got ps_mode = \"async\")"},
      {kRun + ps + "chunk_mb = 0.001\n", "key 'chunk_mb' must be more than 0.001 and at most 4096 MiB (got 0.001)"},
      {kRun + ps + "chunk_mb = 5000\n", "key 'chunk_mb' must be a number from 0.001 to 4096"},
      {kRun + ps + "dedicated_servers = \"yes\"\n", "key 'dedicated_servers' must be a boolean"},
      {kRun + ps + "dedicated_servers = false\nserver_hosts = \"127.0.0.1:1\"\n",
       "key 'server_hosts' places dedicated servers: it contradicts dedicated_servers = false"},
      {kRun + ps + "server_hosts = \"a:0\"\n", "key 'server_hosts': host 'a': slots must be"},
      {kRun + ps + "bucket_mb = 5\n",
       "key 'bucket_mb' is an all-reduce option: it does not apply with strategy = \"ps\""},
      {kRun + ps + "overlap = true\n", "key 'overlap' is an all-reduce option"},
      {kRun + ps + "gpu_gradients = \"host\"\n", "key 'gpu_gradients' is an all-reduce option"},
      {kRun + "strategy = \"ps\"\n", "--strategy ps needs --nproc 2 or more, or --dedicated-servers"},
      {kRun + "nproc = 2\nservers = 2\n", "bad.toml:1: run #1: key 'servers' needs strategy = \"ps\""},
      {kRun + "nproc = 2\nchunk_mb = 2\n", "key 'chunk_mb' needs strategy = \"ps\""},
      {kRun + "nproc = 2\ndedicated_servers = false\n", "key 'dedicated_servers' needs strategy = \"ps\""},
  });
}

// The parameter-server experiments (docs/experiments.md): seven ways to train, per workload,
// twice each, in two interleaved rounds; transformer's runs measure the time to BLEU 30.
TEST(Suite, PsHostsSuiteParsesWithItsSevenWays) {
  TempDir dir;
  const auto suite = cli::load_suite(std::filesystem::path(TS_SOURCE_DIR) / "suites/ps_hosts.toml", dir / "d.db");
  ASSERT_EQ(suite.run_count(), 28u);
  using Strategy = session::RunConfig::Strategy;
  std::vector<std::string> ways;
  for (uint64_t i = 0; i < 7; ++i) {
    const auto c = suite.run_at(i);
    EXPECT_EQ(c.workload, "transformer");
    EXPECT_EQ(c.eval_every, 10);
    EXPECT_EQ(c.quality_target, 30.0);
    EXPECT_EQ(c.hosts, "tsh1:2,tsh2:2");
    std::string way =
        c.strategy == Strategy::allreduce ? "allreduce" : std::string(distributed::ps::to_string(c.ps.mode));
    if (c.strategy == Strategy::ps && c.ps.dedicated) way += " dedicated";
    if (c.strategy == Strategy::ps && c.ps.priority) way += " priority";
    ways.push_back(way);
  }
  EXPECT_EQ(ways, (std::vector<std::string>{"allreduce", "sync", "sync dedicated", "async", "bounded", "eager",
                                            "sync priority"}));
  EXPECT_EQ(suite.run_at(7).workload, "resnet50");
  EXPECT_EQ(suite.run_at(14).workload, "transformer") << "the second round begins";
}

TEST(Suite, ScalingSuitesParse) {
  TempDir dir;
  const auto one_host = cli::load_suite(std::filesystem::path(TS_SOURCE_DIR) / "suites/scaling.toml", dir / "d.db");
  EXPECT_EQ(one_host.run_count(), 10u);
  const auto hosts = cli::load_suite(std::filesystem::path(TS_SOURCE_DIR) / "suites/scaling_hosts.toml", dir / "d.db");
  ASSERT_EQ(hosts.run_count(), 10u);
  int two_host_runs = 0;
  for (uint64_t i = 0; i < hosts.run_count(); ++i) {
    const auto c = hosts.run_at(i);
    EXPECT_EQ(c.threads, 1);
    if (c.hosts.empty()) continue;
    ++two_host_runs;
    EXPECT_EQ(c.nproc, 0) << "one rank per host";
    EXPECT_EQ(c.mca.size(), 3u);
  }
  EXPECT_EQ(two_host_runs, 8);
}
