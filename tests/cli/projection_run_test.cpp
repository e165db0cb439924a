// `trainscope project` and the error ledger end to end: a one-rank source (--shard 0/2), a
// collectives sweep and a 2-rank run through mpirun; the run stores its own projection and error,
// `show` and `projections` print them, scripts/projection-table sets them against repeated runs,
// `project` projects onto other knobs and refuses bad input with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "store/reader.h"
#include "tests/cli/cli_test_util.h"

namespace {

using ts::testing::run_trainscope;
using ts::testing::TempDir;

constexpr const char* kTiny = "--preset tiny --threads 1 --iters 4 --warmup 1";

TEST(ProjectionRun, AMultiRankRunStoresItsOwnProjectionAndError) {
  ASSERT_EQ(std::system("command -v mpirun > /dev/null 2>&1"), 0) << "mpirun not installed";
  TempDir dir;
  const std::string db = (dir / "p.db").string();
  // 1: the source, 2: the sweep, 3: the measured run (its projection: 4).
  ASSERT_EQ(run_trainscope(std::string("run resnet50 ") + kTiny + " --shard 0/2 --db " + db).exit_code, 0);
  auto res = run_trainscope("bench collectives --nproc 2 --collectives all_reduce --min-bytes 64K --max-bytes 4M "
                            "--factor 4 --iters 3 --warmup 1 --db " +
                            db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  res = run_trainscope(std::string("run resnet50 ") + kTiny + " --nproc 2 --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("projected"), std::string::npos) << res.out;
  {
    ts::store::Reader r(db);
    // The source recorded every gradient and its readiness: the ledger could use it.
    EXPECT_FALSE(r.gradients(1).empty());
    const auto ledger = r.projections_of_measured(3);
    ASSERT_EQ(ledger.size(), 1u);
    EXPECT_EQ(ledger[0].source_run_id, 1);
    EXPECT_EQ(ledger[0].sweep_run_id, 2);
    ASSERT_TRUE(ledger[0].error);
    EXPECT_GT(ledger[0].projected_ns, 0);
    // Both ranks on this machine, sweep and run alike: each rank had half its cores.
    for (int64_t run : {2, 3}) {
      std::string per_machine;
      for (const auto& e : r.environment(run)) {
        if (e.key == "ranks_per_machine") per_machine = e.value;
      }
      EXPECT_EQ(per_machine, "2") << "run " << run;
    }
    const auto sweep = r.collective_bench(2);
    ASSERT_FALSE(sweep.empty());
    EXPECT_GT(sweep.back().beside_rate, 0);  // the busy thread beside the calls
    EXPECT_LE(sweep.back().beside_rate, 1.5);
  }
  res = run_trainscope("show 3 --json --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  const auto j = nlohmann::json::parse(res.out);
  ASSERT_EQ(j["projection"]["ledger"].size(), 1u);
  EXPECT_EQ(j["projection"]["ledger"][0]["projection_run"], 4);
  res = run_trainscope("show 4 --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("projection     of run 1 onto 2 ranks"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("throughput"), std::string::npos) << res.out;

  // A projection is a run: compare sets it against the measured one; the report lists the ledger.
  res = run_trainscope("compare 4 3 --db " + db);
  EXPECT_TRUE(res.exit_code == 0 || res.exit_code == 4) << res.out;  // 4: too few iterations to judge
  EXPECT_NE(res.out.find("projection"), std::string::npos) << res.out;
  res = run_trainscope("report " + db + " 3");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("Projections against measured"), std::string::npos) << res.out;

  // The same configuration measured again (5, its projection 6): scripts/projection-table sets the
  // projection against the two runs' median and says how far they lie apart.
  res = run_trainscope(std::string("run resnet50 ") + kTiny + " --nproc 2 --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  {
    ts::store::Reader r(db);
    const auto first = r.projections_of_measured(3), second = r.projections_of_measured(5);
    ASSERT_EQ(first.size(), 1u);
    ASSERT_EQ(second.size(), 1u);
    const double measured[2] = {first[0].measured_ns, second[0].measured_ns};
    const double projected = (first[0].projected_ns + second[0].projected_ns) / 2;
    const double median = (measured[0] + measured[1]) / 2;
    char cell[96];
    std::snprintf(cell, sizeof cell, "| resnet50 | ddp | %+.1f%% (2 apart %.1f%%) |", 100 * (projected / median - 1),
                  100 * (std::max(measured[0], measured[1]) / std::min(measured[0], measured[1]) - 1));
    const auto table = ts::testing::run_command(std::string(TS_SOURCE_DIR) + "/scripts/projection-table " + db);
    ASSERT_EQ(table.exit_code, 0) << table.out;
    EXPECT_NE(table.out.find(cell), std::string::npos) << cell << "\n" << table.out;
    EXPECT_NE(table.out.find("all: n=1 "), std::string::npos) << table.out;  // one cell of two runs
    EXPECT_NE(table.out.find("every measured run on its own: n=2 "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("measured runs apart (the same configuration measured again): n=1 "), std::string::npos)
        << table.out;
    // The error split: compute measured against projected, and the rest of the model's miss.
    EXPECT_NE(table.out.find("compute measured against projected: n=1 "), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("with the measured compute in place of the projected"), std::string::npos) << table.out;
  }

  // Other knobs onto the same source, checked against the same run: a second ledger row.
  res = run_trainscope("project 1 --sweep 2 --ranks 2 --no-overlap --against 3 --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("after backward (no overlap)"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("projection error"), std::string::npos) << res.out;
  // A nominal link (the local sweep measured no TCP rate): said so.
  res = run_trainscope("project 1 --link 1gbit --ranks 4 --json --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  const auto p = nlohmann::json::parse(res.out);
  EXPECT_NE(p["link"].get<std::string>().find("nominal"), std::string::npos);
  EXPECT_GT(p["projected_iteration_ns"].get<double>(), p["source_iteration_ns"].get<double>());
  res = run_trainscope("projections --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("3 checked against their measured runs"), std::string::npos) << res.out;
  res = run_trainscope("projections --json --db " + db);
  EXPECT_EQ(nlohmann::json::parse(res.out)["projections"].size(), 4u);

  // Priority takes cross-barrier as run does (resnet50's step can be cut per parameter), unless
  // told not to; the output and the stored knobs say which.
  res = run_trainscope("project 1 --sweep 2 --ranks 2 --priority --json --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_EQ(nlohmann::json::parse(res.out)["knobs"]["cross_barrier"], true) << res.out;
  res = run_trainscope("project 1 --sweep 2 --ranks 2 --priority --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("overlapped with backward, cross-barrier"), std::string::npos) << res.out;
  res = run_trainscope("project 1 --sweep 2 --ranks 2 --priority --no-cross-barrier --db " + db);
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find(", no cross-barrier"), std::string::npos) << res.out;
  // A parameter server in each mode, said as it was taken (a bound on staleness asks for bounded).
  for (const auto& [flags, said] :
       std::vector<std::pair<std::string, std::string>>{{"--ps-mode async", "parameter server, async,"},
                                                        {"--ps-mode eager", "parameter server, eager,"},
                                                        {"--staleness 2", "parameter server, bounded (staleness 2),"},
                                                        {"", "parameter server, sync,"}}) {
    res = run_trainscope("project 1 --sweep 2 --ranks 2 --strategy ps " + flags + " --db " + db);
    ASSERT_EQ(res.exit_code, 0) << flags << "\n" << res.out;
    EXPECT_NE(res.out.find(said), std::string::npos) << flags << "\n" << res.out;
  }

  // Bad input: exit 2, one line, nothing written.
  const auto runs_before = ts::store::Reader(db).runs().size();
  for (const std::string& bad : {
           "project 3 --link 1gbit --db " + db,                // a multi-rank run is no source
           "project 1 --db " + db,                             // no link
           "project 1 --link fast --db " + db,                 // not a rate
           "project 1 --link 1gbit --ranks 1 --db " + db,      // one rank
           "project 1 --sweep 3 --db " + db,                   // not a sweep
           "project 1 --link 1gbit --bucket-mb 0 --db " + db,  // no bucket
           "project 1 --link 1gbit --against 99 --db " + db,   // no such run
           "project 1 --link 1gbit --strategy ring --db " + db,
           "project 1 --link 1gbit --against 2 --db " + db,  // the sweep: another workload
           "project 1 --link 1gbit --strategy ps --ps-mode hogwild --db " + db,
           "project 1 --link 1gbit --ps-mode async --db " + db,                              // needs --strategy ps
           "project 1 --link 1gbit --strategy ps --ps-mode async --staleness 1 --db " + db,  // bounded only
       }) {
    res = run_trainscope(bad);
    EXPECT_EQ(res.exit_code, 2) << bad << "\n" << res.out;
    EXPECT_NE(res.out.find("trainscope: "), std::string::npos) << bad << "\n" << res.out;
  }
  EXPECT_EQ(ts::store::Reader(db).runs().size(), runs_before);
}

TEST(ProjectionRun, ShardIsForOneProcess) {
  TempDir dir;
  const std::string db = (dir / "s.db").string();
  for (const std::string bad : {"--shard 2/2", "--shard 0/0", "--shard x", "--shard 0/2 --nproc 2"}) {
    const auto res = run_trainscope("run resnet50 --preset tiny --iters 1 " + bad + " --db " + db);
    EXPECT_EQ(res.exit_code, 2) << bad << "\n" << res.out;
    EXPECT_NE(res.out.find("--shard"), std::string::npos) << res.out;
  }
  EXPECT_FALSE(std::filesystem::exists(db));
}

}  // namespace
