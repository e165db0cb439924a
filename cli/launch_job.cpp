#include "cli/launch_job.h"

#include <unistd.h>

#include <cstdlib>
#include <random>
#include <stdexcept>

#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/interrupts.h"
#include "cli/run_config.h"
#include "distributed/launch.h"
#include "distributed/ring_all_reduce.h"
#include "distributed/stall_watch.h"
#include "distributed/tcp_interfaces.h"
#include "fmt/format.h"
#include "reports/number_format.h"
#include "session/run_record.h"
#include "store/reader.h"
#include "store/writer.h"

namespace ts::cli {

namespace {

std::string launch_token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}-{}", rd(), rd(), ::getpid());
}

// The run rank 0 made for this launch, found by the token it stored; 0 when none.
int64_t find_launched_run(const std::filesystem::path& db, const std::string& token) {
  if (!std::filesystem::exists(db)) return 0;
  store::Reader reader(db);
  auto runs = reader.runs();
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    for (const auto& e : reader.environment(it->id)) {
      if (e.key == "launch_token" && e.value == token) return it->id;
    }
  }
  return 0;
}

}  // namespace

JobLaunch job_launch(const RunConfig& c) {
  JobLaunch job;
  job.nproc = c.nproc;
  job.hosts = c.hosts;
  job.hostfile = c.hostfile;
  if (c.strategy == RunConfig::Strategy::ps) {
    job.servers = c.ps.servers;
    job.dedicated_servers = c.ps.dedicated;
    job.server_hosts = c.ps.server_hosts;
  }
  job.mca = c.mca;
  job.db = c.db;
  job.lock_wait = c.lock_wait;
  return job;
}

LaunchedJob launch_job(const JobLaunch& job) {
  distributed::LaunchRequest r;
  r.nproc = static_cast<int>(job.nproc);
  try {
    if (!job.hosts.empty()) r.hosts = distributed::parse_hosts(job.hosts);
    if (!job.hostfile.empty()) r.hosts = distributed::read_hostfile(job.hostfile);
    distributed::check_hosts_resolve(r.hosts);
    r.servers = static_cast<int>(job.servers);
    r.dedicated_servers = job.dedicated_servers;
    if (!job.server_hosts.empty()) {
      r.server_hosts = distributed::parse_hosts(job.server_hosts);
      distributed::check_hosts_resolve(r.server_hosts);
    }
    r.mca = job.mca;
    r.executable = std::filesystem::read_symlink("/proc/self/exe");
    r.rank_args = job.rank_args;
    const std::string token = launch_token();
    r.env = {{"TS_LAUNCH_TOKEN", token}};
    // The all-reduce's algorithm (distributed/ring_all_reduce.h), checked here, once, for every rank.
    if (const char* algorithm = std::getenv("TS_ALLREDUCE"); algorithm && *algorithm) {
      distributed::all_reduce_algorithm();
      r.env.emplace_back("TS_ALLREDUCE", algorithm);
    }
    // The TCP ring's interfaces (distributed/tcp_interfaces.h), likewise.
    if (const char* spec = std::getenv("TS_TCP_IF"); spec && *spec) {
      distributed::check_interface_spec(spec);
      r.env.emplace_back("TS_TCP_IF", spec);
    }
    const distributed::LaunchPlan plan = distributed::plan_launch(r);
    store::Writer::check_target(job.db);  // a db that cannot be written: refused before any rank starts
    if (plan.servers > 0) {
      say(stderr, "trainscope: starting {} ({}, then {}): {}\n", reports::counted(plan.nproc, "rank"),
          reports::counted(plan.workers, "worker"), reports::counted(plan.servers, "parameter server"),
          fmt::join(plan.argv, " "));
    } else {
      say(stderr, "trainscope: starting {}: {}\n", reports::counted(plan.nproc, "rank"), fmt::join(plan.argv, " "));
    }
    LaunchedJob out;
    const distributed::LaunchEnd end = distributed::run_launch(plan, set_job_launcher);  // Ctrl-C reaches the ranks
    out.mpirun_status = end.status;
    out.spilled = end.status == kExitSpilled && end.stall_line.empty();
    try {
      out.run_id = find_launched_run(job.db, token);
    } catch (const store::StoreError& e) {
      // The db cannot be read now (locked, removed): with the results spilled, that is why.
      if (!out.spilled) throw;
      say(stderr, "trainscope: the run's results are in the side file named above ({})\n", e.what());
      return out;
    }
    if (out.spilled) {  // rank 0 left its row (if the db still holds it) `running` for the import
      out.status = store::RunStatus::running;
      return out;
    }
    if (out.run_id == 0) {
      // Rank 0 never made the run: the ranks did not start (unreachable host, ...). Nothing written.
      throw UsageError(fmt::format("the ranks did not start (mpirun exited with status {}; its message is above)",
                                   out.mpirun_status));
    }
    // A stalled job's verdict is the reason (kept what was streamed); else that a rank ended early.
    const std::string why =
        !end.stall_line.empty()
            ? distributed::stall_reason(end.stall_line)
            : fmt::format("a rank ended before the run did (mpirun exited with status {}; see its message above): kept "
                          "what was streamed",
                          out.mpirun_status);
    if ((out.mpirun_status != 0 || !end.stall_line.empty()) &&
        session::RunRecord::finish_elsewhere(job.db, out.run_id, store::RunStatus::failed, why, job.lock_wait)) {
      say(stderr, "trainscope: run {} marked failed\n", out.run_id);
    }
    const auto row = store::Reader(job.db).run(out.run_id);
    out.status = row ? row->status : store::RunStatus::failed;
    return out;
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

int rank_exit_status(int exit_code) {
  const char* token = std::getenv("TS_LAUNCH_TOKEN");
  const bool orderly = exit_code == kExitInterrupted || exit_code == kExitTimedOut;
  return orderly && token && *token ? kExitOk : exit_code;
}

}  // namespace ts::cli
