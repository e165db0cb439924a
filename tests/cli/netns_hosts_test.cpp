// Several hosts on one machine: `trainscope run --hosts tsh1:2,tsh2:2` over network namespaces
// (scripts/netns-hosts, reached through scripts/netns-rsh) trains resnet50 and transformer
// (tiny) on 2 hosts x 2 ranks into one db. Needs root and `ip netns`; skipped, saying why,
// where they cannot be made.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "store/reader.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/distributed_checks.h"

namespace {

using ts::testing::run_command;
using ts::testing::run_trainscope;
using ts::testing::TempDir;

const std::string kScripts = std::string(TS_SOURCE_DIR) + "/scripts/";

// The hosts for one test: made at the start, removed at the end whatever happens.
class NetnsHosts {
 public:
  explicit NetnsHosts(int n) { made_ = run_command(kScripts + "netns-hosts up " + std::to_string(n)); }
  ~NetnsHosts() {
    if (made_.exit_code == 0) run_command(kScripts + "netns-hosts down");
  }
  const ts::testing::CommandResult& made() const { return made_; }

 private:
  ts::testing::CommandResult made_;
};

TEST(NetnsHosts, TwoHostsTimesTwoRanksTrainIntoOneDb) {
  const auto check = run_command(kScripts + "netns-hosts check");
  if (check.exit_code == 2) GTEST_SKIP() << "network namespaces cannot be made here: " << check.out;
  ASSERT_EQ(check.exit_code, 0) << check.out;
  if (!run_command(kScripts + "netns-hosts status | grep -q '^tsh'").exit_code) {
    GTEST_SKIP() << "netns hosts already exist (someone's experiment): not touching them; "
                    "`scripts/netns-hosts down` frees them for this test";
  }
  NetnsHosts hosts(2);
  ASSERT_EQ(hosts.made().exit_code, 0) << hosts.made().out;

  TempDir dir;
  const auto db = dir / "hosts.db";
  for (const std::string workload : {"resnet50", "transformer"}) {
    const auto res = run_trainscope("run " + workload + " --iters 2 --warmup 1 --eval-batches 0 --threads 1 " +
                                    "--hosts tsh1:2,tsh2:2 --bucket-mb 0.05 --mca plm_rsh_agent=" + kScripts +
                                    "netns-rsh --mca oob_tcp_if_include=10.99.0.0/24 "
                                    "--mca btl_tcp_if_include=10.99.0.0/24 --db " +
                                    db.string());
    ASSERT_EQ(res.exit_code, 0) << res.out;
    EXPECT_NE(res.out.find("slowest rank"), std::string::npos) << res.out;
  }
  ts::store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) {
    SCOPED_TRACE(run.workload);
    EXPECT_EQ(run.ranks, 4);
    EXPECT_EQ(run.status, ts::store::RunStatus::completed);
    std::string placement;
    for (const auto& e : r.environment(run.id)) {
      if (e.key == "rank_hosts") placement = e.value;
    }
    EXPECT_EQ(placement, "tsh1 x2, tsh2 x2") << "the ranks ran on the namespace hosts";
    ts::testing::expect_every_ranks_records(r, run.id, 4, 3);
    ts::testing::expect_breakdown_identities(r, run.id);
  }
}

}  // namespace
