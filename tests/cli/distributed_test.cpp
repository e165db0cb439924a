// `trainscope run --nproc N` end to end: one run row with every rank's records, the breakdown's
// identities on every stored iteration, bad distributed input refused with nothing written, and
// a rank killed mid-run stopping the others with the run marked failed, and a stopped launcher
// stopping every rank after its step.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "reports/rank_clocks.h"
#include "store/reader.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/distributed_checks.h"
#include "tests/cli/job_processes.h"
#include "tests/cli/write_lock.h"

namespace {

using ts::testing::expect_breakdown_identities;
using ts::testing::expect_every_ranks_records;
using ts::testing::find_pid;
using ts::testing::processes_naming;
using ts::testing::run_trainscope;
using ts::testing::TempDir;

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
    // Every call of the iterations split into waiting and moving and stored (v13): a row per
    // call and rank, which together are the rank's calls, and the last to arrive waited for no
    // one. The split is on rank 0's clock, so the rank's calls are mapped onto it first, the
    // same way: a measured drift scales every duration (4e-7 made 39 ns of 95 ms once).
    const auto waits = r.collective_waits(run.id);
    const ts::reports::RankClocks clocks(r.rank_clocks(run.id));
    for (int64_t rank = 0; rank < 2; ++rank) {
      int64_t called = 0, calls = 0, split = 0, rows = 0;
      for (const auto& c : r.collectives(run.id, rank)) {
        if (c.iteration < 0) continue;
        called += clocks.to_rank0(rank, c.end_ns) - clocks.to_rank0(rank, c.start_ns);
        ++calls;
      }
      for (const auto& w : waits) {
        if (w.rank != rank) continue;
        split += w.waiting_ns + w.moving_ns;
        ++rows;
        if (w.last_rank == rank) {
          EXPECT_EQ(w.waiting_ns, 0) << w.label;
        }
        EXPECT_GE(w.moving_ns, 0) << w.label;
      }
      EXPECT_EQ(rows, calls) << "rank " << rank;
      EXPECT_EQ(split, called) << "rank " << rank;
    }
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
      const auto res =
          run_trainscope("run " + workload + " --iters 3 --warmup 1 --nproc 2 --priority --partition-mb 0.05" + flag +
                         " --db " + db.string() + " 2>&1");
      ASSERT_EQ(res.exit_code, 0) << res.out;
    }
  }
  const auto refused =
      run_trainscope("run seq2seq --iters 2 --warmup 0 --nproc 2 --priority --db " + db.string() + " 2>&1");
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
      for (size_t k = 0; k < with.size(); ++k)
        EXPECT_EQ(with[k].loss, without[k].loss) << "rank " << rank << " iteration " << k;
    }
    expect_breakdown_identities(r, runs[i].id);
    expect_every_ranks_records(r, runs[i].id, 2, 4);
  }
  EXPECT_EQ(cross_barrier(runs[4].id, 0), 0.0);
}

TEST(DistributedRun, BadDistributedInputIsRefusedWithNothingWritten) {
  TempDir dir;
  const auto db = dir / "bad.db";
  for (const std::string args :
       {"run a3c --nproc 2", "run resnet50 --nproc 0", "run resnet50 --nproc 5000",
        "run resnet50 --hosts no-such-host.invalid:1", "run resnet50 --hosts 127.0.0.1:1 --nproc 2",
        "run resnet50 --hosts a:0", "run resnet50 --hosts 127.0.0.1 --hostfile /nonexistent",
        "run resnet50 --nproc 2 --mca novalue"}) {
    const auto res = run_trainscope(args + " --db " + db.string() + " 2>&1");
    EXPECT_EQ(res.exit_code, 2) << args << "\n" << res.out;
    EXPECT_FALSE(std::filesystem::exists(db)) << args;
  }
  // How a GPU model's gradients travel: refused, with why, where there is no GPU model.
  for (const auto& [args, why] : std::vector<std::pair<std::string, std::string>>{
           {"run resnet50 --nproc 2 --gpu-gradients nccl",
            "--gpu-gradients nccl chooses how a GPU model's gradients travel between ranks: it needs --device cuda "
            "(got --device cpu)"},
           {"run resnet50 --nproc 2 --gpu-gradients sideways", "--gpu-gradients"},
           {"run resnet50 --nproc 2 --strategy ps --gpu-gradients host", "--gpu-gradients is an all-reduce option"}}) {
    const auto res = run_trainscope(args + " --db " + db.string() + " 2>&1");
    EXPECT_EQ(res.exit_code, 2) << args << "\n" << res.out;
    EXPECT_NE(res.out.find(why), std::string::npos) << args << "\n" << res.out;
    EXPECT_FALSE(std::filesystem::exists(db)) << args;
  }
  const auto res = ts::testing::run_command("PATH=/nonexistent " + std::string(TRAINSCOPE_BIN) +
                                            " run resnet50 --nproc 2 --db " + db.string() + " 2>&1");
  EXPECT_EQ(res.exit_code, 2) << res.out;
  EXPECT_NE(res.out.find("mpirun"), std::string::npos) << res.out;
  EXPECT_FALSE(std::filesystem::exists(db));
}

// A two-worker run that would train for hours (`args`: how it is distributed), started in the
// background: its exit status goes to `rc` once it ends. Returns when both workers' iterations
// reach the db.
struct EndlessJob {
  std::filesystem::path db, rc, log;
  explicit EndlessJob(const TempDir& dir, const std::string& args = "")
      : db(dir / "k.db"), rc(dir / "rc"), log(dir / "log") {
    const std::string cmd = std::string(TRAINSCOPE_BIN) + " run resnet50 --iters 1000000 --nproc 2 --eval-batches 0 " +
                            "--flush-interval 0.2 " + args + " --db " + db.string();
    EXPECT_TRUE(ts::testing::start_job(cmd, log, rc));
    for (int i = 0; i < 600; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!std::filesystem::exists(db)) continue;
      try {
        ts::store::Reader r(db);
        const auto runs = r.runs();
        if (!runs.empty() && r.iteration_count(runs[0].id, 1) >= 2) return;
      } catch (const std::exception&) {
      }
    }
  }
  // Seconds until the job ended (at most 60).
  double wait_since(std::chrono::steady_clock::time_point t) const {
    for (int i = 0; i < 600 && !std::filesystem::exists(rc); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the shell's write of rc
    return seconds;
  }
  bool ended() const { return std::filesystem::exists(rc); }
  int exit_status() const { return std::stoi(ts::testing::read_file(rc)); }
};

// Kills rank `victim` of `job` and checks what a death must leave: the others stopped within a
// bounded time, the job failed, the run marked failed with an error and what was measured, the
// db intact.
void expect_a_death_fails_the_run(const EndlessJob& job, int victim) {
  const int pid = find_pid(job.db, victim);
  ASSERT_GT(pid, 0) << "rank " << victim << " never showed up";
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const double seconds = job.wait_since(killed);
  ASSERT_TRUE(job.ended()) << "the job did not end within 60 s of the kill";
  // mpirun's SIGTERM comes 5 s after the death, the survivors give up 4 s later (~9 s).
  EXPECT_LT(seconds, 20.0) << "the other ranks took " << seconds << " s to stop";
  EXPECT_EQ(job.exit_status(), 1) << ts::testing::read_file(job.log);
  ts::store::Reader r(job.db);
  const auto run = r.runs().at(0);
  EXPECT_EQ(run.status, ts::store::RunStatus::failed) << ts::testing::read_file(job.log);
  EXPECT_FALSE(run.error.empty());
  EXPECT_GE(r.iteration_count(run.id, 0), 2) << "what was measured is kept";
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(job.db.c_str(), &h), SQLITE_OK);
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

TEST(DistributedRun, AKilledRankStopsTheOthersAndTheRunIsMarkedFailed) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  expect_a_death_fails_the_run(EndlessJob(dir), 1);
}

// On a parameter server (two workers, rank 2 a dedicated server): a dead server leaves the
// workers waiting for values that never come, a dead worker leaves the server, and in sync
// mode the other worker, waiting for its pushes.
TEST(DistributedRun, ADeadParameterServerOrWorkerStopsTheOthersAndTheRunIsMarkedFailed) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  for (const int victim : {2, 1}) {
    SCOPED_TRACE(victim == 2 ? "the server killed" : "a worker killed");
    TempDir dir;
    expect_a_death_fails_the_run(EndlessJob(dir, "--strategy ps --dedicated-servers"), victim);
  }
}

// Ctrl-C (here SIGTERM: a background job of a non-interactive shell ignores SIGINT, and the
// launcher takes both alike) reaches every rank at once through mpirun's SIGUSR1: the ranks stop
// after their step, the run is `interrupted` with its final summaries, and nobody waits out
// mpirun's kill sequence (5 s + 5 s), which a rank's non-zero exit would start.
TEST(DistributedRun, StoppingTheLauncherStopsEveryRankAfterItsStepAndKeepsTheRun) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  const EndlessJob job(dir);
  const int launcher = find_pid(job.db, -1);
  ASSERT_GT(launcher, 0) << "the launcher never showed up";
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(launcher, SIGTERM), 0);
  const double seconds = job.wait_since(asked);
  ASSERT_TRUE(job.ended()) << "the job did not end within 60 s of the stop";
  EXPECT_LT(seconds, 5.0) << "the ranks took " << seconds << " s to stop";
  const std::string log = ts::testing::read_file(job.log);
  EXPECT_EQ(job.exit_status(), 130) << log;
  ts::store::Reader r(job.db);
  const auto run = r.runs().at(0);
  EXPECT_EQ(run.status, ts::store::RunStatus::interrupted) << log;
  bool have_parameters = false;
  for (const auto& m : r.metrics(run.id)) have_parameters = have_parameters || m.name == "parameter_count";
  EXPECT_TRUE(have_parameters) << "the final write was not done";
  std::set<int64_t> ranks;
  for (const auto& b : r.rank_breakdown(run.id)) ranks.insert(b.rank);
  EXPECT_EQ(ranks, (std::set<int64_t>{0, 1})) << "every rank's breakdown is stored";
}

// The job follows its launcher (issue 39): a launcher killed by SIGKILL (`timeout -s KILL`, a CI
// runner's cancel) cannot relay anything, yet mpirun and every rank end, none left behind, and
// the run is not left `running`.
TEST(DistributedRun, ALauncherKilledOutrightTakesTheJobWithIt) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  const EndlessJob job(dir);
  const int launcher = find_pid(job.db, -1);
  ASSERT_GT(launcher, 0) << "the launcher never showed up";
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(launcher, SIGKILL), 0);
  double seconds = 0;
  for (int i = 0; i < 600 && processes_naming(job.db) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  }
  EXPECT_EQ(processes_naming(job.db, SIGKILL), 0) << "processes left 60 s after the launcher died (killed now)";
  EXPECT_LT(seconds, 20.0) << "the job took " << seconds << " s to end";
  ts::store::Reader r(job.db);
  const auto run = r.runs().at(0);
  EXPECT_NE(run.status, ts::store::RunStatus::running) << ts::testing::read_file(job.log);
  EXPECT_GE(r.iteration_count(run.id, 0), 2) << "what was measured is kept";
}

// A stalled peer (issue 39): rank `victim` stopped with SIGSTOP answers nobody, and its peers
// wait in a collective (or for its values) that will never end. The stall watch names it, with
// its host and the call, the job ends well within 30 s, the run is marked failed with that
// reason and keeps what it measured, and no process is left (the stopped one included).
void expect_a_stall_named(const EndlessJob& job, int victim) {
  const int pid = find_pid(job.db, victim);
  ASSERT_GT(pid, 0) << "rank " << victim << " never showed up";
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const double seconds = job.wait_since(stopped);
  const std::string log = ts::testing::read_file(job.log);
  ASSERT_TRUE(job.ended()) << "the job did not end within 60 s of the stop\n" << log;
  // A first question 5 s into the wait, 5 s for the answers, then MPI_Abort's kill sequence.
  EXPECT_LT(seconds, 30.0) << "the job took " << seconds << " s to end";
  std::printf("rank %d stopped: the job ended %.1f s later\n", victim, seconds);
  EXPECT_EQ(job.exit_status(), 1) << log;
  const std::string named = "rank " + std::to_string(victim) + " (";
  const size_t verdict = log.find("trainscope: stalled job: ");
  ASSERT_NE(verdict, std::string::npos) << log;
  const std::string line = log.substr(verdict, log.find('\n', verdict) - verdict);
  EXPECT_NE(line.find(named), std::string::npos) << line;
  EXPECT_NE(line.find("does not answer"), std::string::npos) << line;
  EXPECT_NE(line.find("has waited"), std::string::npos) << "the call it stalled: " << line;
  EXPECT_NE(log.find("flight record"), std::string::npos) << log;
  ts::store::Reader r(job.db);
  const auto run = r.runs().at(0);
  EXPECT_EQ(run.status, ts::store::RunStatus::failed) << log;
  EXPECT_EQ(run.error.rfind("stalled: ", 0), 0u) << run.error;
  EXPECT_NE(run.error.find(named), std::string::npos) << run.error;
  EXPECT_GE(r.iteration_count(run.id, 0), 2) << "what was measured is kept";
  for (int i = 0; i < 50 && processes_naming(job.db) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(processes_naming(job.db, SIGKILL), 0) << "processes left after the job ended (killed now)";
}

TEST(DistributedRun, AStoppedRankIsNamedAndTheJobEndsWithin30Seconds) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  expect_a_stall_named(EndlessJob(dir), 1);
}

// A stopped parameter server: the workers wait for its values.
TEST(DistributedRun, AStoppedParameterServerIsNamedAndTheJobEnds) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  expect_a_stall_named(EndlessJob(dir, "--strategy ps --dedicated-servers"), 2);
}

// A multi-rank run whose db stays locked through its final write (issue 39): rank 0 spills the
// whole run to a side file, and the launcher exits 3 as docs/cli.md promises, leaving the
// streamed part `running` (not marked failed) for the import to replace.
TEST(DistributedRun, ALockedDbSpillsAndTheLauncherExits3) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not installed (scripts/setup installs openmpi-bin, a dependency)";
  TempDir dir;
  const auto db = dir / "k.db", rc = dir / "rc", log = dir / "log";
  const std::string cmd = std::string(TRAINSCOPE_BIN) +
                          " run resnet50 --iters 60 --warmup 0 --nproc 2 --threads 1 --eval-batches 0 "
                          "--flush-interval 0.1 --lock-wait 2 --db " +
                          db.string();
  ASSERT_TRUE(ts::testing::start_job(cmd, log, rc));
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      ts::store::Reader r(db);
      if (!r.runs().empty() && r.iteration_count(r.runs()[0].id, 0) >= 1) break;
    } catch (const std::exception&) {
    }
  }
  {
    ts::testing::WriteLock lock(db);  // held through the rest of the run and its final write
    ASSERT_TRUE(lock.ok());
    for (int i = 0; i < 1200 && !std::filesystem::exists(rc); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string out = ts::testing::read_file(log);
  ASSERT_TRUE(std::filesystem::exists(rc)) << out;
  EXPECT_EQ(std::stoi(ts::testing::read_file(rc)), 3) << out;
  const size_t import = out.find("trainscope import '");
  ASSERT_NE(import, std::string::npos) << out;
  const size_t start = import + std::string("trainscope import '").size();
  const std::string spill = out.substr(start, out.find('\'', start) - start);
  ASSERT_TRUE(std::filesystem::exists(spill)) << spill;
  {
    ts::store::Reader r(db);
    EXPECT_EQ(r.runs().at(0).status, ts::store::RunStatus::running) << "the streamed part, not marked failed";
  }
  const auto imported = run_trainscope("import " + spill + " --db " + db.string());
  EXPECT_EQ(imported.exit_code, 0) << imported.out;
  ts::store::Reader r(db);
  ASSERT_EQ(r.runs().size(), 1u);
  EXPECT_EQ(r.runs()[0].status, ts::store::RunStatus::completed);
  EXPECT_EQ(r.iterations(r.runs()[0].id).size(), 60u);
}

}  // namespace
