#pragma once
// The run row's whole life (docs/design.md, "The run session"): made at once when a run begins, so a
// crash or Ctrl-C later still leaves a record; heartbeats while it runs; one verdict at its end,
// written with the final rows all or nothing; and when the db refuses that write, the whole run
// in a side file that `trainscope import` merges. The one place that writes a run's status:
// the session, the collectives benchmark, the interrupt handler and the launcher all come here.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "session/notice.h"
#include "store/records.h"
#include "store/writer.h"

namespace ts::session {

// Where a run's results go when its db refuses the final write: beside the db, named for the
// run and this process.
std::filesystem::path spill_path(const std::filesystem::path& db, int64_t run_id);

// What a run stores of where it ran: the machine's snapshot; for a job (`rank_hosts` given) the
// MPI library, the ranks and their hosts; and the launcher's token (TS_LAUNCH_TOKEN), by which
// the launcher finds the run.
std::vector<store::EnvEntry> run_environment(const std::vector<std::string>* rank_hosts);

class RunRecord {
 public:
  // Opens the db (a locked one is waited for up to `lock_wait`) and makes the row, stamped with
  // this process and the time now. Throws when either fails: then there is no run.
  RunRecord(const std::filesystem::path& db, std::chrono::milliseconds lock_wait, store::RunInfo info);
  RunRecord(const RunRecord&) = delete;
  RunRecord& operator=(const RunRecord&) = delete;

  int64_t id() const { return id_; }
  const std::filesystem::path& db() const { return db_; }
  const store::RunInfo& info() const { return info_; }
  // For the rows themselves (metrics, benchmark rows, the recorder's tables).
  store::Writer& writer() { return writer_; }

  void add_environment(std::span<const store::EnvEntry> rows);
  // Rows measured since the last write, with the heartbeat that tells readers the writer lives.
  void heartbeat(store::RunFlush rows);
  // The verdict. finish_if_running leaves one already written (by a rank, a signal) as it is.
  void finish(store::RunStatus status, const std::string& error);
  bool finish_if_running(store::RunStatus status, const std::string& error);

  // The final write: `to_db` (what was not streamed) and the verdict in one transaction. When
  // the db refuses it, `to_spill` writes everything, streamed parts included, into a side file
  // with the same verdict; when that fails too, the error is added, the run is failed, and the
  // verdict alone is tried once more. Says what happened through `notice`.
  using Rows = std::function<void(store::Writer& writer, int64_t run_id)>;
  struct Stored {
    store::RunStatus status = store::RunStatus::completed;
    std::string error;
    std::filesystem::path spill_file;  // set when the results went to a side file
  };
  Stored store_final(const Rows& to_db, const Rows& to_spill, store::RunStatus status, std::string error,
                     const Notice& notice);

  // Another process's (or an earlier) run: its verdict from a connection of its own, unless one
  // was written already. Returns whether it wrote; throws when the db cannot be reached.
  static bool finish_elsewhere(const std::filesystem::path& db, int64_t run_id, store::RunStatus status,
                               const std::string& error, std::chrono::milliseconds lock_wait);

 private:
  std::filesystem::path spill(const Rows& to_spill, store::RunStatus status, const std::string& error) const;

  std::filesystem::path db_;
  store::Writer writer_;
  store::RunInfo info_;
  int64_t id_ = 0;
};

}  // namespace ts::session
