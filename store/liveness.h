#pragma once
// Is a run still being written? Decided from who writes it and when it last wrote (schema v3):
// a run left `running` by a process that died (kill -9, the OOM killer, a lost node) is `lost`;
// one whose writer goes on but whose iterations stopped advancing (schema v9) is `stalled`.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "store/records.h"

namespace ts::store {

enum class Liveness {
  finished,  // not running: completed, failed or interrupted
  live,      // its writer is alive (same host) or its heartbeat is fresh (another host)
  stalled,   // its writer is there, but the run has not advanced for longer than it allows
  lost,      // its writer is gone: the run ended without a word; it keeps what it flushed
  unknown,   // running, but written by a trainscope without heartbeats (before schema v3)
};
std::string_view to_string(Liveness);

// The identity a run row records of the process that writes it.
struct ProcessIdentity {
  std::string host;     // gethostname()
  std::string boot_id;  // /proc/sys/kernel/random/boot_id: tells a reboot (pids start over)
  int64_t pid = 0;
  int64_t pid_start = 0;  // clock ticks after boot (/proc/PID/stat field 22): tells a reused pid
};
ProcessIdentity current_process();
// Records `who` as the writer of a run about to begin (RunInfo's host, boot_id, pid, pid_start).
void set_writer(RunInfo& info, const ProcessIdentity& who);
// The start time of process `pid` on this machine; 0 when no such process exists.
int64_t process_start_time(int64_t pid);

struct LivenessVerdict {
  Liveness state = Liveness::unknown;
  std::string why;  // one line for `runs` / `show`
};
// On this host the writer's pid (with its start time) decides at once, and this host's clock
// dates its heartbeat. For a run written on another host, a heartbeat older than max(60 s, 5
// heartbeat intervals) means lost; one dated ahead of this host's clock (that host's clock is
// ahead) says nothing of its age, so the db file's last write (run.db_written_ms) decides, and
// the verdict says the skew. Live or not, a run whose heartbeat went on stall_after_ms past its
// last progress (both the writer's clock) is stalled.
LivenessVerdict liveness(const RunRow& run, const ProcessIdentity& here, int64_t now_unix_ms);
LivenessVerdict liveness(const RunRow& run);  // here and now

int64_t unix_time_ms();
// A new run identity: 128 random bits as a version-4 UUID ("8-4-4-4-12" hex digits).
std::string new_run_uuid();
// When `db` or its write-ahead log was last modified (Unix ms; 0: unknown).
int64_t last_written_ms(const std::filesystem::path& db);

// What `runs`, `show`, reports and the viewer call a run: its stored status once finished, else
// "running", "stalled", "lost" or "running?" (no heartbeat to tell).
std::string status_label(const RunRow& run, const LivenessVerdict& verdict);
std::string status_label(const RunRow& run);  // here and now

}  // namespace ts::store
