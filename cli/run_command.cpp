#include "cli/run_command.h"

#include "cli/console.h"
#include "cli/exit_codes.h"
#include "cli/interrupts.h"
#include "cli/launch_job.h"
#include "cli/progress.h"
#include "cli/project_command.h"
#include "cli/pytorch_reference.h"
#include "cli/run_flags.h"
#include "cli/summary.h"
#include "distributed/mpi_runtime.h"
#include "fmt/format.h"
#include "reports/collective_split.h"
#include "session/run_session.h"
#include "store/reader.h"
#include "workloads/workload.h"

namespace ts::cli {

namespace {

int exit_code_for(const session::RunOutcome& out) {
  if (!out.spill_file.empty()) return kExitSpilled;
  switch (out.status) {
    case store::RunStatus::completed: return kExitOk;
    case store::RunStatus::interrupted: return kExitInterrupted;
    default: return kExitRunFailed;
  }
}

// Rank 0, once a multi-rank run and its clocks are stored: every collective call split into
// waiting and moving, stored beside it (schema v13). Not part of the run: where it cannot be
// written, readers split the calls on reading, the same way, and a notice says so.
void store_split(const std::filesystem::path& db, int64_t run_id) {
  try {
    reports::store_collective_waits(db, run_id);
  } catch (const std::exception& e) {
    say(stderr,
        "trainscope: run {}: the collectives' waiting/moving split was not stored ({}); show and report "
        "split them on reading\n",
        run_id, e.what());
  }
}

RunOutcome run_session(const RunConfig& c, const std::string& label, const distributed::World* world) {
  const bool shows_progress = !world || world->rank == 0;
  std::optional<Progress> progress;
  std::optional<StageProgress> stages;  // the waits between and after the iterations
  session::SessionHooks hooks;
  hooks.stop = &stop_flag();
  hooks.run_created = [](const std::filesystem::path& db, int64_t id) { set_current_run(db, id); };
  hooks.run_stored = [] { clear_current_run(); };
  hooks.notice = [](const std::string& text) { say(stderr, "{}", text); };
  if (shows_progress) {
    hooks.progress_start = [&](int64_t total) {
      const auto* spec = workloads::find_workload(c.workload);
      progress.emplace(label.empty() ? c.workload + "/" + c.preset : label, total,
                       (spec ? spec->units.headline() : std::string("samples")) + "/s");
    };
    hooks.progress = [&](int64_t done, double rate, bool warmup) {
      if (progress) progress->update(done, rate, warmup);
    };
    hooks.progress_end = [&](const std::string& how) {
      if (progress) progress->finish(how);
    };
    stages.emplace(label.empty() ? c.workload + "/" + c.preset : label);
    hooks.stage = [&](const std::string& what) { stages->begin(what); };
  }
  session::RunSession s(c, hooks, world);
  const session::RunOutcome o = s.run();
  stages.reset();  // its last line, if any, before what follows
  RunOutcome out;
  out.run_id = o.run_id;
  out.spill_file = o.spill_file;
  out.exit_code = exit_code_for(o);
  if (!o.error.empty() && (!world || world->rank == 0))
    say(stderr, "trainscope: run {} failed: {}\n", o.run_id, o.error);
  if (!o.spill_file.empty()) out.exit_code = kExitSpilled;
  if (world && world->size > 1 && world->rank == 0 && o.run_id > 0 && o.spill_file.empty()) {
    store_split(c.db, o.run_id);
    if (o.status == store::RunStatus::completed) store_own_projection(c.db, o.run_id, c.command_line);
  }
  return out;
}

// This process is one rank of a job mpirun (or srun) started.
RunOutcome run_as_rank(const RunConfig& c, const std::string& label) {
  static distributed::MpiRuntime mpi;  // once per process; finalised at exit
  set_stop_deadlines(kRankStopDeadlines);
  RunOutcome out = run_session(c, label, &mpi.world());
  out.exit_code = rank_exit_status(out.exit_code);
  return out;
}

// `trainscope run --nproc N`: starts the ranks through mpirun and waits for them.
RunOutcome launch_ranks(const RunConfig& c) {
  JobLaunch job = job_launch(c);
  job.rank_args = rank_arguments(c);
  const LaunchedJob launched = launch_job(job);
  session::RunOutcome o;
  o.status = launched.status;
  RunOutcome out;
  out.run_id = launched.run_id;
  out.exit_code = launched.spilled ? kExitSpilled : exit_code_for(o);
  return out;
}

}  // namespace

nlohmann::json stored_summary(const std::filesystem::path& db, const RunOutcome& out) {
  if (out.spill_file.empty()) return run_summary(db, out.run_id);
  const auto runs = store::Reader(out.spill_file).runs();
  return run_summary(out.spill_file, runs.empty() ? out.run_id : runs.front().id);
}

RunOutcome execute_run(const RunConfig& c, const std::string& progress_label) {
  validate(c);
  if (c.framework == "pytorch") return run_pytorch_reference(c);
  if (distributed::launched_as_rank()) return run_as_rank(c, progress_label);
  if (launches_ranks(c)) return launch_ranks(c);
  return run_session(c, progress_label, nullptr);
}

}  // namespace ts::cli
