// Several hosts on one machine: `trainscope run --hosts tsh1:2,tsh2:2` over network namespaces
// (scripts/netns-hosts, reached through scripts/netns-rsh) trains resnet50 and transformer
// (tiny) on 2 hosts x 2 ranks into one db; a host cut off, or behind a link at a crawl, stops
// the job naming it. Needs root and `ip netns`; skipped, saying why, where they cannot be made.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "store/reader.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/distributed_checks.h"
#include "tests/cli/job_processes.h"
#include "tests/cli/netns_hosts.h"
#include "vocabulary/clock_alignment.h"

namespace {

using ts::testing::run_command;
using ts::testing::run_trainscope;
using ts::testing::TempDir;

using ts::testing::kOverHosts;
using OneTestAtATime = ts::testing::OneNetnsTestAtATime;
const auto why_no_hosts = ts::testing::why_no_netns_hosts;
// Hosts tsh1..tshN, unshaped: made at the test's start, removed at its end whatever happens.
class NetnsHosts : public ts::testing::NetnsHosts {
 public:
  explicit NetnsHosts(int n) : ts::testing::NetnsHosts(std::to_string(n)) {}
};

// Whether host `ns` reaches 10.99.0.1 (the machine, where mpirun listens) over TCP within
// `seconds`: a connection to a closed port that is refused proves the path (the neighbour entry
// resolved, the link's queue active); "no route" or silence does not. After a link comes back up
// the kernel may need a moment (the carrier's queue is reactivated asynchronously, a neighbour
// entry that failed during the fault is resolved again): a job started in that moment sees its
// Open MPI daemon fail to call back (seen once in CI).
bool host_reaches_machine(const std::string& ns, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  do {
    const auto probe = run_command("ip netns exec " + ns + " timeout 2 bash -c 'exec 3<>/dev/tcp/10.99.0.1/9' 2>&1");
    if (probe.out.find("Connection refused") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

TEST(NetnsHosts, TwoHostsTimesTwoRanksTrainIntoOneDb) {
  const OneTestAtATime alone;
  if (const std::string why = why_no_hosts(); !why.empty()) GTEST_SKIP() << why;
  NetnsHosts hosts(2);
  ASSERT_EQ(hosts.made().exit_code, 0) << hosts.made().out;

  TempDir dir;
  const auto db = dir / "hosts.db";
  for (const std::string workload : {"resnet50", "transformer"}) {
    const auto res = run_trainscope("run " + workload + " --iters 2 --warmup 1 --eval-batches 0 --threads 1 " +
                                    "--hosts tsh1:2,tsh2:2 --bucket-mb 0.05" + kOverHosts + " --db " + db.string());
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

// Hosts whose clocks disagree as hosts booted at different times do (issue 41): tsh2's clock
// runs 2.5 s ahead of tsh1's (scripts/netns-rsh, TS_NETNS_CLOCK_SKEW). The offset rank 0
// measured for rank 1, at the start and at the end, holds the true 2.5 s within its stated bound;
// set on rank 0's clock, rank 1's iterations end where rank 0's do (they end together, in the
// gradients' all-reduce), not 2.5 s later; `show` and the chrome trace say so.
TEST(NetnsHosts, HostsWithSkewedClocksAreAlignedWithinTheStatedBound) {
  const OneTestAtATime alone;
  if (const std::string why = why_no_hosts(); !why.empty()) GTEST_SKIP() << why;
  NetnsHosts hosts(2);
  ASSERT_EQ(hosts.made().exit_code, 0) << hosts.made().out;
  constexpr int64_t kSkew = 2'500'000'000;

  TempDir dir;
  const auto db = dir / "clocks.db";
  const auto res = run_command("TS_NETNS_CLOCK_SKEW=tsh2=" + std::to_string(kSkew) + " " + TRAINSCOPE_BIN +
                               " run resnet50 --iters 4 --warmup 1 --eval-batches 0 --threads 1 --hosts tsh1:1,tsh2:1" +
                               kOverHosts + " --db " + db.string() + " 2>&1");
  ASSERT_EQ(res.exit_code, 0) << res.out;
  ts::store::Reader r(db);
  const auto run = r.runs().at(0);
  const auto rows = r.rank_clocks(run.id);
  ASSERT_EQ(rows.size(), 2u) << "rank 1's clock, at the start and at the end";
  std::optional<ts::vocabulary::ClockOffset> start, end;
  for (const auto& c : rows) {
    SCOPED_TRACE(c.phase);
    EXPECT_EQ(c.rank, 1);
    EXPECT_LE(std::llabs(c.offset_ns - kSkew), c.uncertainty_ns)
        << "measured " << c.offset_ns << " +- " << c.uncertainty_ns << " ns, the truth " << kSkew;
    EXPECT_LT(c.uncertainty_ns, 5'000'000) << "loopback round trips take microseconds, not milliseconds";
    const ts::vocabulary::ClockOffset o{c.offset_ns, c.uncertainty_ns, c.at_ns, c.min_round_trip_ns,
                                        static_cast<int>(c.pings)};
    (c.phase == "start" ? start : end) = o;
  }
  ASSERT_TRUE(start && end);
  const auto model = ts::vocabulary::clock_model(*start, end);
  const auto rank0 = r.iterations(run.id, 0), rank1 = r.iterations(run.id, 1);
  ASSERT_EQ(rank0.size(), rank1.size());
  for (size_t i = 0; i < rank0.size(); ++i) {
    // Raw, rank 1's end is 2.5 s after rank 0's; set on rank 0's clock it is within the iteration's
    // own tail (the last all-reduce's return on each side, a few ms on a busy machine) and the bound.
    const int64_t apart = model.to_reference(rank1[i].end_ns) - rank0[i].end_ns;
    EXPECT_LT(std::llabs(apart), 200'000'000 + model.uncertainty_ns) << "iteration " << i;
    EXPECT_GT(std::llabs(rank1[i].end_ns - rank0[i].end_ns), kSkew / 2) << "the clocks really were apart";
  }
  const auto show = run_trainscope("show " + std::to_string(run.id) + " --db " + db.string());
  // `show` prints the offset it measured (seconds, 6 decimals): the truth within the stated bound
  // (on a loaded machine the bound is wide: 2.498818 s +- 1.95 ms was seen).
  std::smatch printed;
  ASSERT_TRUE(std::regex_search(show.out, printed, std::regex(R"(clocks +rank 1 \+([0-9.]+) s)"))) << show.out;
  EXPECT_LE(std::abs(std::stod(printed[1].str()) * 1e9 - static_cast<double>(kSkew)),
            static_cast<double>(model.uncertainty_ns) + 1000.0)
      << show.out;
  const auto chrome = dir / "t.json";
  ASSERT_EQ(run_trainscope("export " + std::to_string(run.id) + " --chrome " + chrome.string() + " --db " + db.string())
                .exit_code,
            0);
  EXPECT_NE(ts::testing::read_file(chrome).find(R"("clocks":{"aligned_to":"rank 0")"), std::string::npos);
}

// A host whose link goes down, or is shaped to a crawl (8 kbit/s), while its rank trains
// (issue 39): the other rank's stall watch names it and its host, the job ends (measured: 25 s
// from the fault until nothing is left on the host), the run is marked failed with the
// verdict, and no process is left in the cut-off host's namespace (its rank ends itself; its
// Open MPI daemon, which mpirun cannot reach, is ended from within the host).
TEST(NetnsHosts, AHostCutOffOrAtACrawlIsNamedAndNothingIsLeftOnIt) {
  const OneTestAtATime alone;
  if (const std::string why = why_no_hosts(); !why.empty()) GTEST_SKIP() << why;
  NetnsHosts hosts(2);
  ASSERT_EQ(hosts.made().exit_code, 0) << hosts.made().out;
  const std::string crawl = " root tbf rate 8kbit burst 1600 latency 60s";
  const std::vector<std::pair<std::string, std::string>> faults = {
      {"ip link set tsv2 down", "ip link set tsv2 up"},
      {"tc qdisc replace dev tsv2" + crawl + " && ip netns exec tsh2 tc qdisc replace dev eth0" + crawl,
       "tc qdisc del dev tsv2 root; ip netns exec tsh2 tc qdisc del dev eth0 root"},
  };
  for (const auto& [fault, repair] : faults) {
    SCOPED_TRACE(fault);
    TempDir dir;
    const auto db = dir / "k.db", log = dir / "log", rc = dir / "rc";
    const std::string cmd = std::string(TRAINSCOPE_BIN) +
                            " run resnet50 --iters 1000000 --eval-batches 0 --threads 1 --flush-interval 0.2 "
                            "--hosts tsh1:1,tsh2:1" +
                            kOverHosts + " --db " + db.string();
    ASSERT_TRUE(ts::testing::start_job("timeout -s KILL 300 " + cmd, log, rc));
    bool training = false;  // both ranks' iterations in the db
    for (int i = 0; i < 1200 && !training && !std::filesystem::exists(rc); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      try {
        ts::store::Reader r(db);
        const auto runs = r.runs();
        training = !runs.empty() && r.iteration_count(runs[0].id, 1) >= 2;
      } catch (const std::exception&) {
      }
    }
    ASSERT_TRUE(training) << ts::testing::read_file(log);
    const auto faulted = std::chrono::steady_clock::now();
    ASSERT_EQ(run_command(fault).exit_code, 0);
    const auto host_empty = [] { return run_command("test -z \"$(ip netns pids tsh2)\"").exit_code == 0; };
    for (int i = 0; i < 900 && !(std::filesystem::exists(rc) && host_empty()); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - faulted).count();
    const bool ended = std::filesystem::exists(rc), empty = host_empty();
    run_command(repair);
    run_command("ip netns pids tsh2 | xargs -r kill -9");  // whatever a failure left
    EXPECT_TRUE(host_reaches_machine("tsh2", 20)) << "tsh2 does not reach the machine 20 s after: " << repair;
    const std::string out = ts::testing::read_file(log);
    ASSERT_TRUE(ended) << "the job did not end within 90 s of the fault\n" << out;
    EXPECT_TRUE(empty) << "processes left on the cut-off host";
    EXPECT_LT(seconds, 40.0) << "the job took " << seconds << " s to end";
    std::printf("%s: the job ended and the host was empty %.1f s after the fault\n", fault.c_str(), seconds);
    const size_t verdict = out.find("trainscope: stalled job: ");
    ASSERT_NE(verdict, std::string::npos) << out;
    const std::string line = out.substr(verdict, out.find('\n', verdict) - verdict);
    EXPECT_NE(line.find("rank 1 (tsh2)"), std::string::npos) << line;
    ts::store::Reader r(db);
    const auto run = r.runs().at(0);
    EXPECT_EQ(run.status, ts::store::RunStatus::failed) << out;
    EXPECT_EQ(run.error.rfind("stalled: ", 0), 0u) << run.error;
  }
}

}  // namespace
