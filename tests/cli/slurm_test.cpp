// Slurm for real (issue 41): a private Slurm from Debian's packages (scripts/slurm-local: munged,
// slurmctld, and slurmd on one node of this machine, or in each of two namespace hosts) starts the
// ranks with `srun --mpi=pmix`, each process an MPI rank (no --nproc), and rank 0 stores the job as
// one run of 2 ranks: on one node, and across two hosts. srun without --mpi=pmix is refused by every
// task, nothing stored. Needs root and the packages (scripts/setup); skipped, saying why, where Slurm
// or the namespace hosts cannot be started. Everything `up` starts is taken down at the test's end,
// and by the script's own watchdog if this process dies first. Bounded: 60 s for the nodes, 100 s per
// srun (and its job's time limit), 30 s for a job to be placed; a few seconds in all where it works.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "store/reader.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/distributed_checks.h"
#include "tests/cli/netns_hosts.h"

namespace {

using ts::testing::CommandResult;
using ts::testing::run_command;
using ts::testing::TempDir;

const std::string kSlurmLocal = ts::testing::kNetnsScripts + "slurm-local";

// Empty when Slurm can be started here, else why not (scripts/slurm-local check: exit 2).
std::string why_no_slurm() {
  const auto check = run_command(kSlurmLocal + " check");
  if (check.exit_code == 0) return "";
  return (check.exit_code == 2 ? "" : "slurm-local check failed: ") + check.out;
}

// One private Slurm for a test: up in the constructor (bounded: 60 s for the nodes, 600 s at most
// alive, down when this process ends), down in the destructor, whatever happened between. When the
// test failed, the daemons' logs are printed first.
class Slurm {
 public:
  Slurm(const std::filesystem::path& dir, bool two_hosts) : dir_(dir) {
    up_ = run_command(kSlurmLocal + " up --dir " + dir_.string() + (two_hosts ? "" : " --local") + " --owner " +
                      std::to_string(::getpid()) + " --max-time 600 --wait 60");
  }
  ~Slurm() {
    if (up_.exit_code != 0) return;  // a failed up took down what it started
    if (::testing::Test::HasFailure()) {
      std::printf("%s\n", run_command("tail -n 25 " + (dir_ / "log").string() + "/*").out.c_str());
    }
    const auto down = run_command(kSlurmLocal + " down --dir " + dir_.string());
    EXPECT_EQ(down.exit_code, 0) << down.out;
    const auto left = run_command(kSlurmLocal + " status --dir " + dir_.string());
    EXPECT_NE(left.out.find("not running"), std::string::npos) << left.out;
  }
  Slurm(const Slurm&) = delete;
  Slurm& operator=(const Slurm&) = delete;

  const CommandResult& up() const { return up_; }
  // `srun ARGS` against this Slurm, at most `seconds` (timeout(1), and the job's own time limit); a job
  // the nodes cannot take is refused after 30 s rather than left pending.
  CommandResult srun(const std::string& args, int seconds = 100) const {
    return run_command("SLURM_CONF=" + (dir_ / "slurm.conf").string() + " timeout " + std::to_string(seconds) +
                       " srun --immediate=30 --time=" + std::to_string((seconds + 59) / 60) + " " + args);
  }

 private:
  std::filesystem::path dir_;
  CommandResult up_;
};

// A tiny, quick training job: 1 warm-up and 2 timed iterations per rank.
std::string train(const std::filesystem::path& db) {
  return std::string(TRAINSCOPE_BIN) +
         " run resnet50 --preset tiny --iters 2 --warmup 1 --eval-batches 0 --threads 1 --bucket-mb 0.05 --db " +
         db.string();
}

std::string environment(ts::store::Reader& r, int64_t run, const std::string& key) {
  for (const auto& e : r.environment(run)) {
    if (e.key == key) return e.value;
  }
  return "";
}

// The db holds exactly one run, completed, of 2 ranks placed as `placement`, with every rank's records.
void expect_one_run_of_two_ranks(const std::filesystem::path& db, const std::string& placement) {
  ts::store::Reader r(db);
  const auto runs = r.runs();
  ASSERT_EQ(runs.size(), 1u) << "one job, one run (not one per task)";
  const auto& run = runs.front();
  EXPECT_EQ(run.ranks, 2);
  EXPECT_EQ(run.status, ts::store::RunStatus::completed);
  EXPECT_EQ(environment(r, run.id, "rank_hosts"), placement);
  ts::testing::expect_every_ranks_records(r, run.id, 2, 3);
  ts::testing::expect_breakdown_identities(r, run.id);
}

TEST(Slurm, SrunTwoTasksOnOneNodeTrainOneRun) {
  const ts::testing::OneNetnsTestAtATime alone;  // one Slurm test at a time (ports, hosts)
  if (const std::string why = why_no_slurm(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const Slurm slurm(dir / "slurm", /*two_hosts=*/false);
  if (slurm.up().exit_code == 2) GTEST_SKIP() << slurm.up().out;
  ASSERT_EQ(slurm.up().exit_code, 0) << slurm.up().out;
  std::printf("slurm up in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  const auto db = dir / "srun.db";
  const auto res = slurm.srun("--mpi=pmix -n 2 " + train(db));
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("ranks          2 data parallel"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("slowest rank"), std::string::npos) << res.out;
  expect_one_run_of_two_ranks(db, "tsl1 x2");

  // Without --mpi=pmix (this Slurm's MpiDefault is none) the tasks get no MPI rank: each refuses,
  // where it would have trained alone and stored a run of its own.
  const auto alone_tasks = slurm.srun("-n 2 " + train(db), 60);
  EXPECT_EQ(alone_tasks.exit_code, 2) << alone_tasks.out;
  EXPECT_NE(alone_tasks.out.find("srun started this as one of 2 tasks without giving it an MPI rank"),
            std::string::npos)
      << alone_tasks.out;
  EXPECT_EQ(ts::store::Reader(db).runs().size(), 1u) << "nothing stored by the refused tasks";
}

TEST(Slurm, SrunAcrossTwoHostsTrainsOneRun) {
  const ts::testing::OneNetnsTestAtATime alone;
  if (const std::string why = why_no_slurm(); !why.empty()) GTEST_SKIP() << why;
  if (const std::string why = ts::testing::why_no_netns_hosts(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const Slurm slurm(dir / "slurm", /*two_hosts=*/true);
  if (slurm.up().exit_code == 2) GTEST_SKIP() << slurm.up().out;
  ASSERT_EQ(slurm.up().exit_code, 0) << slurm.up().out;
  ASSERT_NE(slurm.up().out.find("up: tsh1 tsh2 "), std::string::npos) << "two nodes, one per host: " << slurm.up().out;

  const auto db = dir / "hosts.db";
  const auto res = slurm.srun("--mpi=pmix -N 2 -n 2 " + train(db));
  ASSERT_EQ(res.exit_code, 0) << res.out;
  EXPECT_NE(res.out.find("slowest rank"), std::string::npos) << res.out;
  expect_one_run_of_two_ranks(db, "tsh1 x1, tsh2 x1");  // a rank on each host
}

}  // namespace
