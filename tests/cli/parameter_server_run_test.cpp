// `trainscope run --strategy ps` end to end: every workload with a plain gradient step trains on
// co-located servers and stores one run with every rank's records, the servers' figures and the
// staleness of what they applied (0 in sync mode); dedicated servers in bounded mode keep the
// bound in what they store; a3c's learners push every update of every worker to the servers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "store/reader.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/distributed_checks.h"

namespace {

using ts::testing::run_trainscope;
using ts::testing::TempDir;

TEST(ParameterServerRun, SyncOnCoLocatedServersStoresTheServersAndNoStaleness) {
  ASSERT_EQ(std::system("command -v mpirun > /dev/null 2>&1"), 0) << "mpirun not installed (scripts/setup installs it)";
  TempDir dir;
  const auto db = dir / "ps.db";
  for (const std::string workload : {"resnet50", "transformer", "wgan"}) {
    const auto res = run_trainscope("run " + workload +
                                    " --preset tiny --iters 3 --warmup 1 --eval-batches 1 --nproc 2 "
                                    "--strategy ps --servers 2 --chunk-mb 0.01 --db " +
                                    db.string() + " 2>&1");
    ASSERT_EQ(res.exit_code, 0) << res.out;
  }
  ts::store::Reader r(db);
  for (const auto& run : r.runs()) {
    SCOPED_TRACE(run.workload);
    EXPECT_EQ(run.status, ts::store::RunStatus::completed);
    EXPECT_NE(run.config_json.find("\"parameter_server\""), std::string::npos);
    ts::testing::expect_every_ranks_records(r, run.id, 2, 4, /*collectives=*/false);  // point-to-point, not collectives
    const auto servers = r.ps_servers(run.id);
    ASSERT_EQ(servers.size(), 2u);
    int64_t keys = 0;
    for (const auto& s : servers) {
      EXPECT_EQ(s.rank, s.server);  // co-located: server s on worker s
      EXPECT_GT(s.pushes, 0);
      EXPECT_EQ(s.pushes % 2, 0);  // every key from both workers, each step
      EXPECT_GT(s.bytes_out, 0);
      keys += s.keys;
    }
    double stored_keys = 0;
    for (const auto& m : r.metrics(run.id)) {
      if (m.name == "ps_keys") stored_keys = m.value;
    }
    EXPECT_EQ(static_cast<double>(keys), stored_keys);
    const auto staleness = r.ps_staleness(run.id);
    ASSERT_FALSE(staleness.empty());
    for (const auto& s : staleness) {
      EXPECT_EQ(s.kind, "updates");
      EXPECT_EQ(s.staleness, 0);  // sync: every gradient meets the value it was computed from
    }
    bool waited = false;
    for (const auto& b : r.rank_breakdown(run.id)) waited = waited || b.pull_wait_ns > 0;
    EXPECT_TRUE(waited) << "no worker ever waited for a pulled value";
  }
}

TEST(ParameterServerRun, BoundedStalenessOnADedicatedServerKeepsItsBound) {
  TempDir dir;
  const auto db = dir / "ps.db";
  const auto res = run_trainscope("run resnet50 --preset tiny --iters 6 --warmup 1 --eval-batches 1 --nproc 2 "
                                  "--strategy ps --dedicated-servers --staleness 1 --db " +
                                  db.string() + " 2>&1");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  ts::store::Reader r(db);
  const auto run = r.runs().at(0);
  EXPECT_EQ(run.ranks, 3);
  EXPECT_EQ(run.global_batch_size, 2 * run.batch_size);  // two workers
  const auto servers = r.ps_servers(run.id);
  ASSERT_EQ(servers.size(), 1u);
  EXPECT_EQ(servers[0].rank, 2);  // after the workers
  int64_t reads = 0;
  for (const auto& s : r.ps_staleness(run.id)) {
    if (s.kind != "clock_gap") continue;
    EXPECT_LE(s.staleness, 1);
    EXPECT_GE(s.staleness, 0);
    reads += s.count;
  }
  EXPECT_GT(reads, 0);
}

TEST(ParameterServerRun, A3cLearnersOnEveryWorkerPushEachUpdateAsynchronously) {
  TempDir dir;
  const auto db = dir / "ps.db";
  // tiny: 2 learners per worker take 8 updates per iteration between them; 1 + 3 iterations.
  constexpr int64_t kUpdatesPerWorker = 8 * 4;
  for (const std::string mode : {"async", "eager"}) {
    const auto res =
        run_trainscope("run a3c --preset tiny --iters 3 --warmup 1 --eval-batches 1 --nproc 2 --strategy ps "
                       "--servers 2 --chunk-mb 0.25 --eval-every 2 --ps-mode " +
                       mode + " --db " + db.string() + " 2>&1");
    ASSERT_EQ(res.exit_code, 0) << res.out;
  }
  ts::store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) {
    SCOPED_TRACE(run.config_json);
    EXPECT_EQ(run.status, ts::store::RunStatus::completed);
    ts::testing::expect_every_ranks_records(r, run.id, 2, 4, /*collectives=*/false);
    int64_t pushes = 0, keys = 0;
    for (const auto& s : r.ps_servers(run.id)) {
      // Every key of every learner's update, from both workers: none lost, none twice.
      EXPECT_EQ(s.pushes, s.keys * 2 * kUpdatesPerWorker) << "server " << s.server;
      EXPECT_EQ(s.updates, s.pushes);
      pushes += s.pushes;
      keys += s.keys;
    }
    EXPECT_GT(keys, 2) << "the chunk size should split the network into several keys";
    int64_t recorded = 0, stale = 0;
    for (const auto& s : r.ps_staleness(run.id)) {
      ASSERT_EQ(s.kind, "updates");
      EXPECT_GE(s.staleness, 0);
      recorded += s.count;
      if (s.staleness > 0) stale += s.count;
    }
    EXPECT_EQ(recorded, pushes) << "every applied push has its staleness stored";
    // Four learners in two processes push without waiting for one another: some gradient always
    // meets a value newer than the one it was computed on.
    EXPECT_GT(stale, 0);
    // Evaluated after timed iteration 2 (the servers' values installed in the shared network
    // the learners never train themselves) and at the end.
    std::vector<int64_t> evaluated;
    for (const auto& m : r.metrics(run.id)) {
      if (m.name == "mean_episode_score") evaluated.push_back(m.iteration);
    }
    EXPECT_EQ(evaluated, (std::vector<int64_t>{2, -1}));
  }
}

}  // namespace
