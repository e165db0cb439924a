// Launch planning: hosts, hostfiles, slots, and the mpirun command they make. Resolvable hosts
// are given as addresses: a fresh machine may have no /etc/hosts entry for localhost.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "distributed/launch.h"
#include "distributed/mpi_runtime.h"
#include "tests/support/files.h"
#include "tests/workloads/env_override.h"

namespace ts::distributed {
namespace {

bool has(const std::vector<std::string>& argv, std::initializer_list<std::string> seq) {
  return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
}

TEST(Launch, ParsesHostsWithSlots) {
  const auto h = parse_hosts("a:2,b,c.example:3");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].host, "a");
  EXPECT_EQ(h[0].slots, 2);
  EXPECT_EQ(h[1].slots, 1);
  EXPECT_EQ(h[2].host, "c.example");
  EXPECT_EQ(h[2].slots, 3);
  for (const char* bad : {"", "a:0", "a:x", "a:2,,b", "a,a", "a b", "a:-1", "a:99999"}) {
    EXPECT_THROW(parse_hosts(bad), std::invalid_argument) << bad;
  }
}

TEST(Launch, ReadsHostfilesInOpenMpiForm) {
  ts::testing::ScratchDir dir("launch");
  const auto path = dir.path() / "hosts";
  std::ofstream(path) << "# two hosts\nn1 slots=2\nn2:3   # comment\n\nn3\n";
  const auto h = read_hostfile(path);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].slots, 2);
  EXPECT_EQ(h[1].slots, 3);
  EXPECT_EQ(h[2].slots, 1);
  std::ofstream(path) << "n1 cores=2\n";
  EXPECT_THROW(read_hostfile(path), std::invalid_argument);
  std::ofstream(path) << "# nothing\n";
  EXPECT_THROW(read_hostfile(path), std::invalid_argument);
  EXPECT_THROW(read_hostfile(dir.path() / "missing"), std::invalid_argument);
}

TEST(Launch, UnknownHostsAreNamed) {
  EXPECT_NO_THROW(check_hosts_resolve({{"127.0.0.1", 1}}));
  try {
    check_hosts_resolve({{"127.0.0.1", 1}, {"no-such-host.invalid", 1}});
    FAIL() << "resolved an .invalid name";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-host.invalid"), std::string::npos);
  }
}

TEST(Launch, PlansLocalAndMultiHostCommands) {
  // mpirun is a dependency (scripts/setup installs openmpi-bin): its absence is a failure here.
  ASSERT_NO_THROW((void)find_mpirun());
  LaunchRequest r;
  r.nproc = 3;
  r.executable = "/bin/trainscope";
  r.rank_args = {"run", "resnet50"};
  auto p = plan_launch(r);
  EXPECT_EQ(p.nproc, 3);
  EXPECT_EQ(p.ranks_per_host, 3);
  EXPECT_TRUE(has(p.argv, {"-np", "3"}));
  EXPECT_TRUE(has(p.argv, {"--bind-to", "none"}));
  EXPECT_TRUE(has(p.argv, {"--oversubscribe"}));
  EXPECT_TRUE(has(p.argv, {"/bin/trainscope", "run", "resnet50"}));

  r.nproc = 0;
  r.hosts = {{"h1", 2}, {"h2", 2}};
  r.rsh_agent = "/x/netns-rsh";
  r.network = "10.99.0.0/24";
  p = plan_launch(r);
  EXPECT_EQ(p.nproc, 4);
  EXPECT_EQ(p.ranks_per_host, 2);
  EXPECT_TRUE(has(p.argv, {"--host", "h1:2,h2:2"}));
  EXPECT_TRUE(has(p.argv, {"--mca", "plm_rsh_agent", "/x/netns-rsh"}));
  EXPECT_TRUE(has(p.argv, {"--mca", "btl_tcp_if_include", "10.99.0.0/24"}));
  r.nproc = 3;
  EXPECT_EQ(plan_launch(r).ranks_per_host, 2);
  r.nproc = 5;
  EXPECT_THROW(plan_launch(r), std::invalid_argument);  // more ranks than slots
}

// The value of `flag` in the plan's argv ("" when absent).
std::string value_of(const std::vector<std::string>& argv, const std::string& flag) {
  const auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

// Dedicated parameter servers without hosts of their own: ranks after the workers, started by
// the same mpirun (locally, or in the hosts' next slots), counted in ranks_per_host.
TEST(Launch, PlansDedicatedServersAfterTheWorkers) {
  ASSERT_NO_THROW((void)find_mpirun());
  LaunchRequest r;
  r.nproc = 2;
  r.servers = 2;
  r.dedicated_servers = true;
  r.executable = "/bin/trainscope";
  auto p = plan_launch(r);
  EXPECT_EQ(p.workers, 2);
  EXPECT_EQ(p.servers, 2);
  EXPECT_EQ(p.nproc, 4);
  EXPECT_EQ(p.ranks_per_host, 4) << "threads per rank count the server ranks too";
  EXPECT_TRUE(has(p.argv, {"-np", "4"}));
  EXPECT_TRUE(has(p.argv, {"--oversubscribe"}));
  EXPECT_TRUE(p.rank_hosts.empty());

  r.nproc = 1;  // one worker and its server: two ranks
  r.servers = 1;
  p = plan_launch(r);
  EXPECT_EQ(p.nproc, 2);
  EXPECT_TRUE(has(p.argv, {"-np", "2"}));

  // On hosts, the servers take the slots after the workers: 3 workers + 1 server on 2 x 2 slots.
  r.hosts = {{"h1", 2}, {"h2", 2}};
  r.nproc = 3;
  p = plan_launch(r);
  EXPECT_EQ(p.nproc, 4);
  EXPECT_EQ(p.ranks_per_host, 2);
  EXPECT_TRUE(has(p.argv, {"--host", "h1:2,h2:2"}));
  EXPECT_FALSE(has(p.argv, {"--map-by", "seq"}));
  // --nproc 0: one rank per slot, the servers' among them.
  r.nproc = 0;
  p = plan_launch(r);
  EXPECT_EQ(p.workers, 3);
  EXPECT_EQ(p.nproc, 4);
  // The slots check counts workers and servers.
  r.nproc = 4;
  try {
    (void)plan_launch(r);
    FAIL() << "4 workers and a server on 4 slots";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--nproc 4 and 1 dedicated server ask for 5 ranks"), std::string::npos)
        << e.what();
  }
  r.nproc = 0;
  r.servers = 4;  // no slot left for a worker
  EXPECT_THROW(plan_launch(r), std::invalid_argument);
}

// Co-located servers are threads of workers 0..S-1: no ranks of their own, and no more of them
// than the workers.
TEST(Launch, CoLocatedServersNeedAsManyWorkers) {
  ASSERT_NO_THROW((void)find_mpirun());
  LaunchRequest r;
  r.nproc = 3;
  r.servers = 3;
  r.executable = "/bin/trainscope";
  auto p = plan_launch(r);
  EXPECT_EQ(p.nproc, 3);
  EXPECT_EQ(p.servers, 0);
  EXPECT_TRUE(has(p.argv, {"-np", "3"}));
  r.servers = 4;
  EXPECT_THROW(plan_launch(r), std::invalid_argument);
  r.nproc = 0;  // with hosts, the workers are their slots
  r.hosts = {{"h1", 2}, {"h2", 2}};
  EXPECT_EQ(plan_launch(r).nproc, 4);
  r.servers = 5;
  EXPECT_THROW(plan_launch(r), std::invalid_argument);
  r.servers = 1;
  r.server_hosts = {{"s1", 1}};  // server hosts are for dedicated servers
  EXPECT_THROW(plan_launch(r), std::invalid_argument);
}

// --server-hosts: every rank placed exactly, in rank order (OpenMPI's sequential mapper reads
// the --host list entry by entry): the workers on the hosts, the servers on the server hosts,
// a host in both lists holding both.
TEST(Launch, PlacesServerRanksOnTheServerHosts) {
  ASSERT_NO_THROW((void)find_mpirun());
  LaunchRequest r;
  r.executable = "/bin/trainscope";
  r.rank_args = {"run", "resnet50"};
  r.hosts = {{"w1", 2}, {"w2", 2}};
  r.nproc = 3;
  r.servers = 2;
  r.dedicated_servers = true;
  r.server_hosts = {{"s1", 1}, {"s2", 1}};
  auto p = plan_launch(r);
  EXPECT_EQ(p.workers, 3);
  EXPECT_EQ(p.servers, 2);
  EXPECT_EQ(p.nproc, 5);
  EXPECT_EQ(p.rank_hosts, (std::vector<std::string>{"w1", "w1", "w2", "s1", "s2"}));
  EXPECT_TRUE(has(p.argv, {"-np", "5"}));
  EXPECT_TRUE(has(p.argv, {"--map-by", "seq", "--host", "w1,w1,w2,s1,s2"}));
  EXPECT_FALSE(has(p.argv, {"--oversubscribe"}));
  EXPECT_EQ(p.ranks_per_host, 2);
  EXPECT_TRUE(has(p.argv, {"/bin/trainscope", "run", "resnet50"}));
  EXPECT_EQ(std::count(p.argv.begin(), p.argv.end(), "--host"), 1);

  // A server host that is also a worker host: its ranks add up (w1: 2 workers and a server).
  r.server_hosts = {{"w1", 1}, {"s1", 1}};
  p = plan_launch(r);
  EXPECT_EQ(value_of(p.argv, "--host"), "w1,w1,w2,w1,s1");
  EXPECT_EQ(p.ranks_per_host, 3);

  // --nproc 0: a worker per slot of the hosts; the server hosts' slots are the servers' own.
  r.nproc = 0;
  r.servers = 1;
  p = plan_launch(r);
  EXPECT_EQ(value_of(p.argv, "--host"), "w1,w1,w2,w2,w1");
  EXPECT_EQ(p.workers, 4);
  EXPECT_EQ(p.nproc, 5);

  // Servers fill the server hosts' slots in order; more servers than those slots are refused.
  r.server_hosts = {{"s1", 2}, {"s2", 1}};
  r.servers = 3;
  EXPECT_EQ(value_of(plan_launch(r).argv, "--host"), "w1,w1,w2,w2,s1,s1,s2");
  r.servers = 4;
  try {
    (void)plan_launch(r);
    FAIL() << "4 servers on 3 server slots";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--servers 4 asks for more servers than --server-hosts offer (3 slots)"),
              std::string::npos)
        << e.what();
  }
  r.servers = 1;
  r.nproc = 5;  // workers beyond the hosts' slots: refused as without servers
  EXPECT_THROW(plan_launch(r), std::invalid_argument);

  // Workers on this machine (no hosts), servers elsewhere; this machine's names are one host.
  r.hosts.clear();
  r.nproc = 2;
  r.servers = 2;
  r.server_hosts = {{"127.0.0.1", 1}, {"s2", 1}};
  p = plan_launch(r);
  EXPECT_EQ(value_of(p.argv, "--host"), "localhost,localhost,127.0.0.1,s2");
  EXPECT_EQ(p.ranks_per_host, 3) << "localhost and 127.0.0.1 are the same machine";
  EXPECT_FALSE(has(p.argv, {"--oversubscribe"}));
}

// Without ssh or rsh (a container, the lent GPU machine) OpenMPI's default launcher stops a job
// even when every rank runs here; such a job gets the single-machine launcher, others do not.
TEST(Launch, RanksHereAloneNeedNoSshWhereThereIsNone) {
  const auto mpirun = find_mpirun();
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  const ts::testing::ScratchDir dir("launch_path");
  const std::filesystem::path bin = dir.path();
  std::filesystem::create_symlink(mpirun, bin / "mpirun");
  ::setenv("PATH", bin.c_str(), 1);  // mpirun, and neither ssh nor rsh
  LaunchRequest r;
  r.nproc = 2;
  r.executable = "/bin/trainscope";
  EXPECT_TRUE(has(plan_launch(r).argv, {"--mca", "plm", "isolated"}));
  r.nproc = 0;
  r.hosts = {{"localhost", 2}};
  EXPECT_TRUE(has(plan_launch(r).argv, {"--mca", "plm", "isolated"})) << "localhost is this machine";
  r.hosts = {{"127.0.0.1", 1}, {"h2", 1}};
  EXPECT_FALSE(has(plan_launch(r).argv, {"--mca", "plm", "isolated"})) << "h2 needs a remote launcher";
  // With ssh installed, OpenMPI's own choice stands.
  { std::ofstream(bin / "ssh") << "#!/bin/sh\n"; }
  std::filesystem::permissions(bin / "ssh", std::filesystem::perms::owner_all);
  r.hosts.clear();
  r.nproc = 2;
  EXPECT_FALSE(has(plan_launch(r).argv, {"--mca", "plm", "isolated"}));
  ::setenv("PATH", saved.c_str(), 1);
}

TEST(Launch, MissingMpirunIsABadInputError) {
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", "/nonexistent", 1);
  EXPECT_THROW(find_mpirun(), std::invalid_argument);
  ::setenv("PATH", saved.c_str(), 1);
}

// srun -n 2 without --mpi=pmix (Slurm's MpiDefault none) starts two tasks that MPI knows nothing of:
// each would run as a job of its own. Counted from srun's SLURM_STEP_NUM_TASKS, only where no
// launcher gave the process a rank.
TEST(Launch, SrunTasksWithoutAnMpiRankAreCounted) {
  if (launched_as_rank()) GTEST_SKIP() << "this test process is an MPI rank itself";
  {
    const ts::testing::EnvOverride tasks("SLURM_STEP_NUM_TASKS", "2");
    EXPECT_EQ(srun_tasks_without_rank(), 2);
    {
      const ts::testing::EnvOverride pmix("PMIX_RANK", "1");  // srun --mpi=pmix: a rank
      EXPECT_EQ(srun_tasks_without_rank(), 0);
    }
    EXPECT_EQ(srun_tasks_without_rank(), 2);
  }
  for (const char* alone : {"1", "0", "", "two", "2x", "-3", "99999999999"}) {
    const ts::testing::EnvOverride tasks("SLURM_STEP_NUM_TASKS", alone);
    EXPECT_EQ(srun_tasks_without_rank(), 0) << alone;
  }
}

}  // namespace
}  // namespace ts::distributed
