#pragma once
// A run's lifecycle, the same for a single process and for every rank of a distributed run, as
// a pipeline of owned stages (docs/design.md, "How a run flows"): the plan (run_plan.h), the run row
// (run_record.h, rank 0), the instruments (instruments.h), the stream that writes the run while
// it runs (run_stream.h: rank 0 to the db, other ranks to rank 0), the training loop with its
// strategy, the gathering of the ranks' records (rank_records.h) and the final write. The cli
// parses flags and prints; what a figure means is decided in session/record.cpp (docs/formulas.md).
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "distributed/mpi_runtime.h"
#include "session/notice.h"
#include "session/run_config.h"
#include "store/records.h"

namespace ts::session {

struct RunOutcome {
  int64_t run_id = 0;  // 0 on ranks other than 0 (only rank 0 knows the db)
  store::RunStatus status = store::RunStatus::completed;
  std::string error;
  std::filesystem::path spill_file;  // set when the db refused the final write
};

// What the session asks of the process around it (the cli: signals and the progress display).
struct SessionHooks {
  const std::atomic<bool>* stop = nullptr;  // set asynchronously to stop after this iteration
  // The run row exists / its final write is done (what a second Ctrl-C marks interrupted).
  std::function<void(const std::filesystem::path& db, int64_t run_id)> run_created;
  std::function<void()> run_stored;
  // Progress: the loop starts (total iterations), an iteration ended, the loop ended (how).
  std::function<void(int64_t total)> progress_start;
  std::function<void(int64_t done, double rate_per_s, bool warmup)> progress;  // in the headline's unit
  std::function<void(const std::string& how)> progress_end;
  // A wait outside the iterations begins ("building the model", "evaluating on 8 held-out
  // batches", "writing the results"); "" when the last one ended.
  std::function<void(const std::string& what)> stage;
  // What the run has to tell the user (warnings, where its results went): whole lines, for the
  // process to print; session/ prints nothing itself.
  Notice notice;
};

class RunSession {
 public:
  // `world`: this rank's place when launched as one of several (null: a single process).
  RunSession(const RunConfig& config, SessionHooks hooks, const distributed::World* world = nullptr);
  // Trains and stores the run. Failures after the run row exists are stored (failed /
  // interrupted) and returned; throws only when the run could not begin (the row could not be
  // made or the stream could not start: the row then says failed).
  RunOutcome run();

 private:
  RunConfig config_;
  SessionHooks hooks_;
  const distributed::World* world_;
};

}  // namespace ts::session
