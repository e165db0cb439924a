#pragma once
// Starting a job's ranks through mpirun from the command a user typed (`run --nproc`, `bench
// collectives`): the ranks run this same executable with `rank_args`; rank 0 makes the job's
// run row and stores the launch token with it, which is how the launcher finds that row after
// mpirun returns and marks it failed when a rank ended early.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli/run_config.h"
#include "store/records.h"

namespace ts::cli {

struct JobLaunch {
  int64_t nproc = 1;               // with hosts, 0: one rank per slot
  std::string hosts;               // "h1:2,h2:2", or empty
  std::filesystem::path hostfile;  // or a hostfile, or neither (local ranks)
  // Parameter-server shards (distributed::LaunchRequest): co-located ones are checked against the
  // workers; dedicated ones are ranks of their own after the `nproc` workers, on `server_hosts`
  // ("s1:1,s2:1") when given, else in the hosts' next slots.
  int64_t servers = 0;
  bool dedicated_servers = false;
  std::string server_hosts;
  std::vector<std::pair<std::string, std::string>> mca;
  std::vector<std::string> rank_args;  // the subcommand and its flags, without the launch flags
  std::filesystem::path db;
  std::chrono::milliseconds lock_wait{60'000};
};

struct LaunchedJob {
  int64_t run_id = 0;
  int mpirun_status = 0;
  // Rank 0's final write went to a side file (it said which, and the import command): the
  // results are whole, the run in the db is its streamed part, left `running` for import.
  bool spilled = false;
  store::RunStatus status = store::RunStatus::failed;  // the run's, after the launcher's verdict
};

// The launch a config asks for (its nproc, hosts or hostfile, mca, db, lock wait, and under
// --strategy ps its servers); the caller adds the ranks' arguments.
JobLaunch job_launch(const RunConfig& config);

// Checks what can be checked (hosts, slots, mpirun, the db), starts the ranks and waits for
// them. UsageError (exit 2, nothing written) for bad input and for ranks that never made the run.
// Rank 0 exiting kExitSpilled (mpirun passes the first non-zero exit on) is a spill, not a failure.
LaunchedJob launch_job(const JobLaunch& job);

// A rank's exit status for mpirun. Under this launcher (TS_LAUNCH_TOKEN set), which takes the
// verdict from the db, an orderly stop (`interrupted`, or the benchmark's --timeout between sizes)
// exits 0: any non-zero exit makes mpirun run its kill sequence (SIGCONT, 5 s, SIGTERM, 5 s,
// SIGKILL) on ranks that have already ended.
int rank_exit_status(int exit_code);

}  // namespace ts::cli
