// `trainscope run --nproc N` end to end: one run row with every rank's records, the breakdown's
// identities on every stored iteration, bad distributed input refused with nothing written, and
// a rank killed mid-run stopping the others with the run marked failed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "store/reader.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/distributed_checks.h"

namespace {

using ts::testing::TempDir;
using ts::testing::run_trainscope;
using ts::testing::expect_breakdown_identities;
using ts::testing::expect_every_ranks_records;

bool have_mpirun() { return std::system("command -v mpirun > /dev/null 2>&1") == 0; }

TEST(DistributedRun, TwoRanksStoreOneRunWithEveryRanksRecords) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  const auto db = dir / "d.db";
  for (const std::string workload : {"resnet50", "transformer", "wgan"}) {
    const auto res = run_trainscope("run " + workload + " --iters 3 --warmup 1 --nproc 2 --bucket-mb 0.05 --db " +
                                    db.string() + " 2>&1");
    ASSERT_EQ(res.exit_code, 0) << res.out;
    EXPECT_NE(res.out.find("per rank"), std::string::npos) << res.out;
    EXPECT_NE(res.out.find("slowest rank"), std::string::npos) << res.out;
  }
  ts::store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 3u);
  for (const auto& run : runs) {
    SCOPED_TRACE(run.workload);
    EXPECT_EQ(run.ranks, 2);
    EXPECT_EQ(run.global_batch_size, 2 * run.batch_size);
    EXPECT_EQ(run.status, ts::store::RunStatus::completed);
    expect_every_ranks_records(r, run.id, 2, 4);
    expect_breakdown_identities(r, run.id);
    bool reduced = false;
    for (const auto& op : r.comm_ops(run.id)) reduced = reduced || (op.collective == "all_reduce" && op.bytes > 1000);
    EXPECT_TRUE(reduced);
    // Where the ranks ran: both on this machine.
    std::string placement;
    for (const auto& e : r.environment(run.id)) {
      if (e.key == "rank_hosts") placement = e.value;
    }
    EXPECT_TRUE(placement.ends_with(" x2") && placement.find(',') == std::string::npos) << placement;
    // Each rank's share of exposed and hidden communication, fractions of a whole.
    for (int rank = 0; rank < 2; ++rank) {
      int fractions = 0;
      for (const auto& m : r.metrics(run.id, rank)) {
        if (m.name != "exposed_comm_fraction" && m.name != "comm_hidden_fraction") continue;
        ++fractions;
        EXPECT_GE(m.value, 0.0) << m.name;
        EXPECT_LE(m.value, 1.0) << m.name;
      }
      EXPECT_EQ(fractions, 2) << "rank " << rank;
    }
  }
  // scripts/scaling-report lists every run with its job throughput and exposed comm.
  const auto report = ts::testing::run_command(std::string(TS_SOURCE_DIR) + "/scripts/scaling-report " + db.string());
  ASSERT_EQ(report.exit_code, 0) << report.out;
  for (const std::string workload : {"resnet50", "transformer", "wgan"}) {
    EXPECT_NE(report.out.find(workload), std::string::npos) << report.out;
  }
  EXPECT_NE(report.out.find("exposed comm"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("%"), std::string::npos) << report.out;
  // wgan averages its critic and its generator separately: both groups' buckets are reduced.
  int64_t wgan = runs[2].id;
  bool critic = false, generator = false;
  for (const auto& c : r.collectives(wgan, 0)) {
    critic = critic || c.label.rfind("bucket 0.", 0) == 0;
    generator = generator || c.label.rfind("bucket 1.", 0) == 0;
  }
  EXPECT_TRUE(critic && generator);
}

// --priority's cross-barrier updates (per parameter, the next forward gated layer by layer)
// train exactly as the whole step after backward: the same losses, bit for bit, on every rank;
// a stale or racing parameter would change them. Where the workload cannot split its step
// (seq2seq clips by the global norm) the run says so and priority still orders the buckets.
TEST(DistributedRun, PriorityCrossBarrierTrainsAsTheWholeStep) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  const auto db = dir / "cb.db";
  for (const std::string workload : {"resnet50", "transformer"}) {
    for (const std::string flag : {"", " --no-cross-barrier"}) {
      const auto res = run_trainscope("run " + workload + " --iters 3 --warmup 1 --nproc 2 --priority --partition-mb 0.05" +
                                      flag + " --db " + db.string() + " 2>&1");
      ASSERT_EQ(res.exit_code, 0) << res.out;
    }
  }
  const auto refused = run_trainscope("run seq2seq --iters 2 --warmup 0 --nproc 2 --priority --db " + db.string() + " 2>&1");
  ASSERT_EQ(refused.exit_code, 0) << refused.out;
  EXPECT_NE(refused.out.find("no cross-barrier updates"), std::string::npos) << refused.out;

  ts::store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 5u);
  const auto cross_barrier = [&](int64_t run, int rank) {
    for (const auto& m : r.metrics(run, rank)) {
      if (m.name == "dp_cross_barrier") return m.value;
    }
    return -1.0;
  };
  for (size_t i = 0; i < 4; i += 2) {
    SCOPED_TRACE(runs[i].workload);
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(cross_barrier(runs[i].id, rank), 1.0);
      EXPECT_EQ(cross_barrier(runs[i + 1].id, rank), 0.0);
      const auto with = r.iterations(runs[i].id, rank), without = r.iterations(runs[i + 1].id, rank);
      ASSERT_EQ(with.size(), 4u);
      ASSERT_EQ(with.size(), without.size());
      for (size_t k = 0; k < with.size(); ++k) EXPECT_EQ(with[k].loss, without[k].loss) << "rank " << rank << " iteration " << k;
    }
    expect_breakdown_identities(r, runs[i].id);
    expect_every_ranks_records(r, runs[i].id, 2, 4);
  }
  EXPECT_EQ(cross_barrier(runs[4].id, 0), 0.0);
}

TEST(DistributedRun, BadDistributedInputIsRefusedWithNothingWritten) {
  TempDir dir;
  const auto db = dir / "bad.db";
  for (const std::string args : {"run a3c --nproc 2", "run resnet50 --nproc 0", "run resnet50 --nproc 5000",
                                 "run resnet50 --hosts no-such-host.invalid:1",
                                 "run resnet50 --hosts 127.0.0.1:1 --nproc 2", "run resnet50 --hosts a:0",
                                 "run resnet50 --hosts 127.0.0.1 --hostfile /nonexistent",
                                 "run resnet50 --nproc 2 --mca novalue"}) {
    const auto res = run_trainscope(args + " --db " + db.string() + " 2>&1");
    EXPECT_EQ(res.exit_code, 2) << args << "\n" << res.out;
    EXPECT_FALSE(std::filesystem::exists(db)) << args;
  }
  const auto res = ts::testing::run_command("PATH=/nonexistent " + std::string(TRAINSCOPE_BIN) +
                                                " run resnet50 --nproc 2 --db " + db.string() + " 2>&1");
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_NE(res.out.find("mpirun"), std::string::npos) << res.out;
  EXPECT_FALSE(std::filesystem::exists(db));
}

// The pid of the rank `rank` of the run writing `db` (its environment says which rank it is).
int find_rank_pid(const std::filesystem::path& db, int rank) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(e.path() / "cmdline"), env(e.path() / "environ");
    std::string c((std::istreambuf_iterator<char>(cmd)), {}), v((std::istreambuf_iterator<char>(env)), {});
    if (c.find(db.string()) == std::string::npos || c.find("mpirun") == 0) continue;
    if (v.find("OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0') != std::string::npos) return std::stoi(name);
  }
  return -1;
}

TEST(DistributedRun, AKilledRankStopsTheOthersAndTheRunIsMarkedFailed) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  const auto db = dir / "k.db", rc = dir / "rc", log = dir / "log";
  const std::string cmd = std::string(TRAINSCOPE_BIN) + " run resnet50 --iters 1000000 --nproc 2 --eval-batches 0 " +
                          "--flush-interval 0.2 --db " + db.string();
  ASSERT_EQ(std::system(("(" + cmd + " > " + log.string() + " 2>&1; echo $? > " + rc.string() + ") &").c_str()), 0);
  // Wait until both ranks' iterations reach the db.
  int pid = -1;
  for (int i = 0; i < 600 && pid < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!std::filesystem::exists(db)) continue;
    try {
      ts::store::Reader r(db);
      const auto runs = r.runs();
      if (!runs.empty() && r.iteration_count(runs[0].id, 1) >= 2) pid = find_rank_pid(db, 1);
    } catch (const std::exception&) {
    }
  }
  ASSERT_GT(pid, 0) << "rank 1 never showed up";
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (int i = 0; i < 600 && !std::filesystem::exists(rc); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  ASSERT_TRUE(std::filesystem::exists(rc)) << "the job did not end within 60 s of the kill";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LT(seconds, 20.0) << "the other rank took " << seconds << " s to stop";
  EXPECT_EQ(std::stoi(ts::testing::read_file(rc)), 1) << ts::testing::read_file(log);
  ts::store::Reader r(db);
  const auto run = r.runs().at(0);
  EXPECT_EQ(run.status, ts::store::RunStatus::failed) << ts::testing::read_file(log);
  EXPECT_FALSE(run.error.empty());
  EXPECT_GE(r.iteration_count(run.id, 0), 2) << "what was measured is kept";
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  std::string verdict;
  sqlite3_exec(
      h, "PRAGMA integrity_check",
      [](void* out, int, char** v, char**) {
        *static_cast<std::string*>(out) = v[0];
        return 0;
      },
      &verdict, nullptr);
  sqlite3_close(h);
  EXPECT_EQ(verdict, "ok");
}

}  // namespace
