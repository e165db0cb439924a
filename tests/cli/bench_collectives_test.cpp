// `trainscope bench collectives` end to end: ranks through mpirun, the nccl-tests table printed,
// one run row of workload `collectives` with a checked row per collective and size and every
// rank's calls (their p50/p99 what the stored calls give), `show` on it, --json read back, the
// --timeout firing on a held-up rank and between sizes, and bad input refused with nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "reports/statistics.h"
#include "store/reader.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/job_processes.h"

namespace {

using ts::testing::run_trainscope;
using ts::testing::TempDir;

TEST(BenchCollectives, TwoRanksPrintAndStoreEverySize) {
  ASSERT_EQ(std::system("command -v mpirun > /dev/null 2>&1"), 0)
      << "mpirun not installed (scripts/setup installs openmpi-bin)";
  TempDir dir;
  const auto db = dir / "b.db";
  const auto res = run_trainscope("bench collectives --nproc 2 --min-bytes 8 --max-bytes 4K --factor 4 --iters 3 "
                                  "--warmup 1 --db " +
                                  db.string());
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("busbw(GB/s)"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("stored in"), std::string::npos) << res.out;
  EXPECT_EQ(res.out.find("WRONG"), std::string::npos) << res.out;

  ts::store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].workload, "collectives");
  EXPECT_EQ(runs[0].ranks, 2);
  EXPECT_EQ(runs[0].status, ts::store::RunStatus::completed);
  const auto rows = r.collective_bench(runs[0].id);
  std::map<std::string, int> per_collective;
  for (const auto& row : rows) {
    ++per_collective[row.collective];
    EXPECT_EQ(row.backend, "mpi");
    EXPECT_EQ(row.ranks, 2);
    EXPECT_EQ(row.iterations, 3);
    EXPECT_GT(row.time_ns, 0);
    if (row.collective == "all_reduce") {
      EXPECT_NEAR(row.busbw_gbps, row.algbw_gbps, 1e-9);  // 2(n-1)/n = 1
    }
    if (row.collective == "all_gather") {
      EXPECT_NEAR(row.busbw_gbps, row.algbw_gbps / 2, 1e-9);
    }
  }
  // 8, 32, 128, 512, 2048 bytes (4 K is past 2048 * 4); all-gather and reduce-scatter round 8 B to 2 floats.
  EXPECT_EQ(per_collective["all_reduce"], 5);
  EXPECT_EQ(per_collective["broadcast"], 5);
  EXPECT_EQ(per_collective["all_gather"], 5);
  EXPECT_EQ(per_collective["reduce_scatter"], 5);
  EXPECT_EQ(per_collective["barrier"], 1);
  for (const auto& m : r.metrics(runs[0].id)) {
    if (m.name == "wrong_elements") {
      EXPECT_EQ(m.value, 0);
    }
  }
  // Every rank's 3 calls of every row, stored; the row's p50 and p99 are those of the calls' times,
  // each the longer of its two ranks' (numpy's quantile).
  const auto samples = r.collective_bench_samples(runs[0].id);
  EXPECT_EQ(samples.size(), 2 * rows.size());
  for (const auto& row : rows) {
    SCOPED_TRACE(row.collective + " " + std::to_string(row.bytes));
    EXPECT_EQ(row.samples, 6);
    EXPECT_NEAR(row.bus_factor,
                row.collective == "barrier"      ? 0.0
                : row.collective == "all_reduce" ? 1.0
                : row.collective == "broadcast"  ? 1.0
                                                 : 0.5,
                1e-12);
    std::vector<double> calls(3, 0.0);
    int ranks = 0;
    for (const auto& s : samples) {
      if (s.collective != row.collective || s.bytes != row.bytes) continue;
      ++ranks;
      ASSERT_EQ(s.time_ns.size(), 3u);
      for (size_t i = 0; i < 3; ++i) calls[i] = std::max(calls[i], static_cast<double>(s.time_ns[i]));
    }
    ASSERT_EQ(ranks, 2);
    EXPECT_DOUBLE_EQ(row.p50_ns, ts::reports::quantile(calls, 0.5));
    EXPECT_DOUBLE_EQ(row.p99_ns, ts::reports::quantile(calls, 0.99));
    EXPECT_GE(row.p50_ns, static_cast<double>(row.min_time_ns));
    EXPECT_GE(row.p99_ns, row.p50_ns);
    EXPECT_LE(row.p99_ns, static_cast<double>(row.max_time_ns));
  }
  EXPECT_NE(res.out.find("p99(us)"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("# stragglers and spikes"), std::string::npos) << res.out;

  const auto listed = run_trainscope("runs --db " + db.string());
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  EXPECT_NE(listed.out.find("collectives"), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find("0.00"), std::string::npos) << "no samples/s for a benchmark of collectives\n"
                                                        << listed.out;

  const auto show = run_trainscope("show " + std::to_string(runs[0].id) + " --db " + db.string());
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("reduce_scatter"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("busbw(GB/s)"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("# stragglers and spikes"), std::string::npos) << show.out;
}

TEST(BenchCollectives, JsonHasEveryRow) {
  TempDir dir;
  const auto db = dir / "j.db";
  const auto res = run_trainscope("bench collectives --nproc 2 --collectives all_reduce,barrier --max-bytes 64 "
                                  "--iters 2 --json --db " +
                                  db.string() + " 2>/dev/null");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  const auto j = nlohmann::json::parse(res.out.substr(res.out.find('{')));
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["wrong_elements"], 0);
  EXPECT_EQ(j["timed_out"], false);
  EXPECT_EQ(j["spike_factor"], 3.0);
  ASSERT_EQ(j["rows"].size(), 5u);  // 8, 16, 32, 64 bytes and the barrier
  // Each row as stored, with its percentiles, bus factor, calls and their spread.
  ts::store::Reader r(db);
  const int64_t run = j["run_id"].get<int64_t>();
  const auto stored = r.collective_bench(run);
  ASSERT_EQ(stored.size(), 5u);
  int64_t spikes = 0;
  for (size_t i = 0; i < stored.size(); ++i) {
    const auto& row = j["rows"][i];
    SCOPED_TRACE(row.dump());
    EXPECT_EQ(row["collective"], stored[i].collective);
    EXPECT_EQ(row["bytes"], stored[i].bytes);
    EXPECT_EQ(row["samples"], 4);
    EXPECT_DOUBLE_EQ(row["p50_ns"].get<double>(), stored[i].p50_ns);
    EXPECT_DOUBLE_EQ(row["p99_ns"].get<double>(), stored[i].p99_ns);
    EXPECT_DOUBLE_EQ(row["bus_factor"].get<double>(), stored[i].collective == "barrier" ? 0.0 : 1.0);
    EXPECT_DOUBLE_EQ(row["busbw_gbps"].get<double>(),
                     row["algbw_gbps"].get<double>() * row["bus_factor"].get<double>());
    const auto& sp = row["spread"];
    EXPECT_EQ(sp["calls"], 2);
    const int64_t longest = sp["longest_rank"].get<int64_t>();
    ASSERT_TRUE(longest == 0 || longest == 1);
    EXPECT_EQ(sp["longest_by_rank"][0].get<int64_t>() + sp["longest_by_rank"][1].get<int64_t>(), 2);
    EXPECT_EQ(sp["longest_rank_calls"], sp["longest_by_rank"][longest]);
    EXPECT_GE(sp["worst_ratio"].get<double>(), 1.0);
    spikes += sp["spikes"].get<int64_t>();
  }
  EXPECT_EQ(j["spikes"], spikes);
  // show --json gives the same rows.
  const auto show = run_trainscope("show " + std::to_string(run) + " --json --db " + db.string() + " 2>/dev/null");
  ASSERT_EQ(show.exit_code, 0) << show.out;
  const auto shown = nlohmann::json::parse(show.out.substr(show.out.find('{')));
  EXPECT_EQ(shown["collective_bench"], j["rows"]);
}

TEST(BenchCollectives, BadInputIsRefusedWithNothingWritten) {
  TempDir dir;
  const auto db = dir / "bad.db";
  for (const std::string args :
       {"--backend gloo", "--collectives all_to_all", "--min-bytes 12Q", "--min-bytes 1K --max-bytes 8",
        "--max-bytes 9G", "--factor 1", "--iters 0", "--timeout -1", "--timeout inf", "--timeout 1e9", "--nproc 0",
        "--hosts 127.0.0.1:1 --hostfile /nonexistent", "--hosts no-such-host.invalid:2", "--mca novalue"}) {
    const auto res = run_trainscope("bench collectives " + args + " --db " + db.string());
    EXPECT_EQ(res.exit_code, 2) << args << "\n" << res.out;
    EXPECT_FALSE(std::filesystem::exists(db)) << args;
  }
}

// --nproc, --hosts, --hostfile, --mca, --db, --lock-wait and --json are run's options
// (session/run_options.cpp): the same value is refused with the same words by both commands.
TEST(BenchCollectives, SharesRunsOptionsAndTheirChecks) {
  TempDir dir;
  const auto db = dir / "shared.db";
  for (const std::string args : {"--lock-wait -1", "--lock-wait inf", "--nproc 5000", "--mca novalue"}) {
    const auto bench = run_trainscope("bench collectives " + args + " --db " + db.string());
    const auto run = run_trainscope("run resnet50 --preset tiny " + args + " --db " + db.string());
    EXPECT_EQ(bench.exit_code, 2) << args << "\n" << bench.out;
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.out;
    const std::string flag = args.substr(0, args.find(' '));
    const auto line_of = [&](const std::string& out) {
      const auto at = out.find(flag);
      return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
    };
    EXPECT_FALSE(line_of(bench.out).empty()) << args << "\n" << bench.out;
    EXPECT_EQ(line_of(bench.out), line_of(run.out)) << args;
  }
  EXPECT_FALSE(std::filesystem::exists(db));
}

// NCCL needs a CUDA build and a GPU: refused with the reason where either is missing, run where both are.
TEST(BenchCollectives, NcclRunsWhereThereIsAGpuAndIsRefusedElsewhere) {
  TempDir dir;
  const auto db = dir / "n.db";
  const auto res =
      run_trainscope("bench collectives --backend nccl --nproc 1 --max-bytes 64 --iters 2 --db " + db.string());
  if (res.exit_code == 2) {
    EXPECT_TRUE(res.out.find("GPU") != std::string::npos || res.out.find("CUDA build") != std::string::npos) << res.out;
    EXPECT_FALSE(std::filesystem::exists(db));
    return;
  }
  ASSERT_EQ(res.exit_code, 0) << res.out;
  ts::store::Reader r(db);
  const auto rows = r.collective_bench(r.runs().at(0).id);
  ASSERT_FALSE(rows.empty());
  for (const auto& row : rows) EXPECT_EQ(row.backend, "nccl");
}

// A rank of the benchmark stopped with SIGSTOP (issue 39): the other rank's stall watch names it
// and the job ends, the run marked failed with the verdict, no process left. (Ranks that answer
// are never stopped here: the largest calls on a slow link rightly take minutes.)
TEST(BenchCollectives, AStoppedRankIsNamedAndTheJobEnds) {
  ASSERT_EQ(std::system("command -v mpirun > /dev/null 2>&1"), 0)
      << "mpirun not installed (scripts/setup installs openmpi-bin)";
  TempDir dir;
  const auto db = dir / "b.db", log = dir / "log", rc = dir / "rc";
  const std::string cmd = std::string(TRAINSCOPE_BIN) +
                          " bench collectives --nproc 2 --collectives all_reduce --min-bytes 1M --max-bytes 1M "
                          "--iters 1000000 --warmup 1 --db " +
                          db.string();
  ASSERT_TRUE(ts::testing::start_job(cmd, log, rc));
  int victim = -1;
  for (int i = 0; i < 300 && victim < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (std::filesystem::exists(db)) victim = ts::testing::find_pid(db, 1);
  }
  ASSERT_GT(victim, 0) << ts::testing::read_file(log);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // in the timed calls
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  for (int i = 0; i < 600 && !std::filesystem::exists(rc); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string out = ts::testing::read_file(log);
  ASSERT_TRUE(std::filesystem::exists(rc)) << "the job did not end within 60 s of the stop\n" << out;
  EXPECT_LT(seconds, 30.0);
  EXPECT_NE(out.find("trainscope: stalled job: rank 0"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 ("), std::string::npos) << out;
  EXPECT_NE(out.find("benchmark all_reduce #"), std::string::npos) << "the call, numbered: " << out;
  ts::store::Reader r(db);
  EXPECT_EQ(r.runs().at(0).status, ts::store::RunStatus::failed);
  EXPECT_EQ(r.runs().at(0).error.rfind("stalled: ", 0), 0u) << r.runs().at(0).error;
  for (int i = 0; i < 50 && ts::testing::processes_naming(db) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ts::testing::processes_naming(db, SIGKILL), 0) << "processes left (killed now)";
}

// --timeout with a rank held up before its first timed call (TS_TEST_BENCH_STALL; alive, answering
// its stall watch): the other rank waits in the all-reduce, and when the limit passes its watch
// ends the job naming the rank it waits for; exit 5, the run failed "timed out: ...", no process left.
TEST(BenchCollectives, TheTimeoutEndsAJobHeldUpByARank) {
  ASSERT_EQ(std::system("command -v mpirun > /dev/null 2>&1"), 0)
      << "mpirun not installed (scripts/setup installs openmpi-bin)";
  TempDir dir;
  const auto db = dir / "t.db";
  const auto started = std::chrono::steady_clock::now();
  const auto res = ts::testing::run_command("TS_TEST_BENCH_STALL=1:120 " + std::string(TRAINSCOPE_BIN) +
                                            " bench collectives --nproc 2 --collectives all_reduce --max-bytes 64 "
                                            "--iters 2 --warmup 1 --timeout 3 --db " +
                                            db.string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(res.exit_code, 5) << res.out;
  EXPECT_LT(seconds, 60.0) << res.out;
  EXPECT_NE(res.out.find("timed out: the sweep's --timeout of 3 s passed; rank 0"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("waiting for rank 1"), std::string::npos) << "the rank held up, named: " << res.out;
  ts::store::Reader r(db);
  const auto run = r.runs().at(0);
  EXPECT_EQ(run.status, ts::store::RunStatus::failed);
  EXPECT_EQ(run.error.rfind("timed out: the sweep's --timeout of 3 s passed", 0), 0u) << run.error;
  EXPECT_TRUE(r.collective_bench(run.id).empty());
  for (int i = 0; i < 50 && ts::testing::processes_naming(db) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ts::testing::processes_naming(db, SIGKILL), 0) << "processes left (killed now)";
}

// --timeout passed while no rank is in a call (every rank held up before its first timed call):
// every rank stops at the next size, the first size kept; exit 5, --json says so.
TEST(BenchCollectives, TheTimeoutBetweenSizesKeepsWhatWasMeasured) {
  TempDir dir;
  const auto db = dir / "t.db";
  ::setenv("TS_TEST_BENCH_STALL", "all:3", 1);
  const auto started = std::chrono::steady_clock::now();
  const auto res = ts::testing::run_trainscope_split(
      "bench collectives --nproc 2 --collectives all_reduce --max-bytes 64 --iters 2 --warmup 1 --timeout 1.5 --json "
      "--db " +
      db.string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ::unsetenv("TS_TEST_BENCH_STALL");
  EXPECT_EQ(res.exit_code, 5) << res.out << res.err;
  EXPECT_LT(seconds, 12.0) << "the ranks end in order, no kill sequence: " << res.err;
  EXPECT_NE(res.err.find("trainscope: timed out: the sweep's --timeout of 1.5 s passed"), std::string::npos) << res.err;
  const auto j = nlohmann::json::parse(res.out);
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["timed_out"], true);
  EXPECT_EQ(j["timeout_s"], 1.5);
  EXPECT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["error"].get<std::string>().rfind("timed out: the sweep's --timeout of 1.5 s passed (between sizes, "
                                                "after all_reduce at 8 bytes)",
                                                0),
            0u)
      << j["error"];
  ts::store::Reader r(db);
  EXPECT_EQ(r.runs().at(0).error, j["error"]);
  EXPECT_EQ(r.collective_bench(r.runs().at(0).id).size(), 1u);
}

}  // namespace
