#pragma once
// Starting the ranks: `trainscope run W --nproc N [--hosts h1:2,h2:2 | --hostfile F]` becomes one
// mpirun command that starts this same executable N times, each a rank (distributed/mpi_runtime.h tells
// it so). Everything that can be checked is checked before mpirun starts (hosts that do not
// resolve, more ranks than slots, mpirun missing): std::invalid_argument, which the cli turns
// into exit code 2 with nothing written.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ts::distributed {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// "h1:2,h2:2" (slots default to 1). Names are checked for what OpenMPI accepts.
std::vector<HostSlots> parse_hosts(std::string_view spec);
// A hostfile: one host per line as `host`, `host:N` or `host slots=N` (OpenMPI's form); `#` comments.
std::vector<HostSlots> read_hostfile(const std::filesystem::path& path);
// Throws std::invalid_argument naming the first host that does not resolve.
void check_hosts_resolve(const std::vector<HostSlots>& hosts);
// The mpirun on PATH (or $TS_MPIRUN); std::invalid_argument when there is none.
std::filesystem::path find_mpirun();

struct LaunchRequest {
  int nproc = 0;                 // workers; 0: the hosts' slots (less dedicated servers sharing them)
  std::vector<HostSlots> hosts;  // empty: N local ranks
  // Parameter-server shards (0: none). Co-located (not dedicated): threads of workers 0..servers-1,
  // no ranks of their own, so there may be no more of them than workers. Dedicated: ranks of their
  // own, nproc..nproc+servers-1, started after the workers.
  int servers = 0;
  bool dedicated_servers = false;
  // Where the dedicated servers run, each host's slots being the servers' own (a host may also be
  // one of `hosts`: its ranks add up). Empty: after the workers, in the hosts' next slots (local
  // ranks when there are no hosts). Given: every rank is placed exactly (mpirun --map-by seq).
  std::vector<HostSlots> server_hosts;
  std::filesystem::path executable;    // this program
  std::vector<std::string> rank_args;  // the ranks' arguments (the run's, without the launch flags)
  std::string rsh_agent;               // OpenMPI's plm_rsh_agent (network-namespace hosts), or empty
  std::string network;                 // CIDR for OpenMPI's TCP traffic (oob/btl if_include), or empty
  std::vector<std::pair<std::string, std::string>> mca;  // extra --mca name value
  std::vector<std::pair<std::string, std::string>> env;  // exported to every rank (-x)
};

struct LaunchPlan {
  int nproc = 0;                        // the ranks mpirun starts: workers, then dedicated servers
  int workers = 0;                      // ranks 0..workers-1
  int servers = 0;                      // dedicated server ranks, workers..nproc-1 (0: none)
  int ranks_per_host = 0;               // the most ranks on one host, servers included: threads per rank = cores / this
  std::vector<std::string> rank_hosts;  // with server hosts: rank i's host (mpirun --map-by seq); else empty
  std::vector<std::string> argv;        // mpirun and its arguments
};

// The mpirun command for `request` (mpirun located by find_mpirun). Validates ranks against slots
// (workers and dedicated servers alike) and co-located servers against the workers.
LaunchPlan plan_launch(const LaunchRequest& request);

// The all-reduce settings that keep busbw near the link rate over TCP (docs/distributed.md).
std::vector<std::pair<std::string, std::string>> default_mca();

struct LaunchEnd {
  int status = 0;          // mpirun's exit status (128 + signal when a signal ended it)
  std::string stall_line;  // a rank's verdict when it stopped a stalled job (stall_watch.h), or empty
};

// Runs the plan's mpirun in a process group of its own, stdin from /dev/null, its stderr relayed
// (a rank's stall verdict is picked out of it: mpirun still there 15 s after one is killed), and
// waits for it. `running` is told mpirun's pid once it runs and 0 once it has ended: signals are
// the caller's to relay (SIGUSR1, which mpirun passes to every rank at once; SIGTERM, on which
// mpirun kills the ranks).
LaunchEnd run_launch(const LaunchPlan& plan, const std::function<void(pid_t)>& running = {});

}  // namespace ts::distributed
