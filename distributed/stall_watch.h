#pragma once
// Hang detection for a distributed run (docs/distributed.md, "A stalled rank"). Every blocking
// exchange with other ranks (each collective, a parameter-server wait, records sent to rank 0)
// is registered while it lasts (StallWatch::Call), numbered within its channel as a flight
// recorder does. A thread on every rank answers the other ranks' questions about what this rank
// is doing, and watches this rank's own calls: one that has waited long enough asks every
// other rank. A rank that does not answer (stopped, dead, cut off), or past the deadline one
// that answers but does not arrive, or a call every rank is in that does not end (a link at a
// crawl), stops the job with one line that names the ranks, their hosts, the call and what
// each rank was doing (stall_verdict.h).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "distributed/stall_verdict.h"

namespace ts::distributed {

// The first words of the line a rank prints when it stops the job: the launcher finds the line
// by them in mpirun's output and stores it as the run's reason (launch.h).
inline constexpr std::string_view kStallLinePrefix = "trainscope: stalled job: ";
// A verdict's line when the job's time limit passed (StallOptions::limit_at) starts so.
inline constexpr std::string_view kTimeoutWords = "timed out: ";
// The reason a stopped job's run is marked failed with: "stalled: " and the verdict's line, or a
// time limit's line as it is ("timed out: ...").
inline std::string stall_reason(std::string_view line) {
  return line.starts_with(kTimeoutWords) ? std::string(line) : "stalled: " + std::string(line);
}

struct StallOptions {
  // How long a rank that answers but does not arrive may keep the others waiting; 0: from what
  // the run measured (StallWatch::deadline_ms).
  std::chrono::milliseconds deadline{0};
  // No deadline at all for ranks that answer: only a silent rank stops the job (the collectives
  // benchmark, whose largest calls on a slow link rightly take minutes).
  bool silence_only = false;
  // Called on the rank that stops the job, with the verdict's line, before it does (rank 0
  // marks its run failed with it).
  std::function<void(const std::string&)> on_stop;
  // A time limit on the whole job, on this rank's clock (the collectives benchmark's --timeout):
  // once it has passed, a call still in flight on this rank is asked about at once and the job
  // stops, with a line that starts with kTimeoutWords, then `limit_text`, then what the call
  // waits for, whatever the deadline above (a lower rank that is in a call too speaks first).
  // Not once this rank's phase is `ending`.
  std::optional<std::chrono::steady_clock::time_point> limit_at;
  std::string limit_text;  // "the sweep's --timeout of 30 s passed"
};

class StallWatch {
 public:
  // Collective over `world`: every rank makes its watch at the same point.
  StallWatch(MPI_Comm world, StallOptions options);
  ~StallWatch();  // the thread stops: before MPI_Finalize
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // The process's watch, or null: calls register with it wherever they are made.
  static StallWatch* active();
  // What this rank does now (no effect without a watch).
  static void set_phase(RunPhase phase);
  RunPhase phase() const { return phase_.load(); }

  // One blocking call with other ranks, registered while it lasts (nothing without a watch).
  class Call {
   public:
    Call(std::string_view channel, std::string_view what, std::string_view label, int peer = kEveryRank);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    StallWatch* watch_ = nullptr;
    uint64_t id_ = 0;
  };

  // Replaces the options' on_stop (rank 0 sets it once its run has a row).
  void set_on_stop(std::function<void(const std::string&)> on_stop);

  // This rank's answer: phase, calls in flight, the last ones finished.
  RankState state() const;
  // How long a rank that answers may keep this one waiting, in `phase`: --stall-timeout, or
  // ten times the longest iteration this rank has seen, at least 20 s (120 s before the first).
  int64_t deadline_ms(RunPhase phase) const;
  // How often a wait asks the others: a quarter of the deadline, 1 to 5 s (5 s without one).
  int64_t probe_interval_ms(RunPhase phase) const;

 private:
  struct Entry {
    uint64_t id = 0;
    CallState call;
    int64_t start_ms = 0;
  };
  struct Probe;
  struct Outgoing;

  uint64_t begin_call(std::string_view channel, std::string_view what, std::string_view label, int peer);
  void end_call(uint64_t id);
  void loop();
  void answer_queries();
  void send(int to, int tag, std::string text);  // nonblocking: the thread never waits on a rank
  void send_progress();
  void track_iterations();
  void watch_own_calls();
  void start_probe(const Entry& oldest);
  void conclude_probe();
  // Says why, marks the run (on_stop), ends the job (MPI_Abort; this rank in any case within
  // 15 s); `cut_off`: no rank answered, so this rank's host may be the one cut off.
  [[noreturn]] void stop_job(const std::string& line, bool cut_off);
  bool past_limit() const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;  // by rank
  StallOptions options_;
  std::atomic<RunPhase> phase_{RunPhase::starting};

  mutable std::mutex mutex_;  // the calls' books below, and options_.on_stop
  uint64_t next_id_ = 0;
  std::vector<Entry> in_flight_;
  std::deque<CallState> recent_;
  std::map<std::string, int64_t> started_, completed_;

  // The thread's own (no lock).
  std::atomic<int64_t> longest_iteration_ms_{0};
  int32_t last_iteration_ = -1;
  int64_t last_iteration_change_ms_ = 0;
  std::unique_ptr<Probe> probe_;
  int next_probe_id_ = 0;
  uint64_t probed_call_ = 0;       // the call the next probe threshold is for
  int64_t next_probe_at_ms_ = 0;   // its wait at which to ask again
  bool deferred_ = false;          // a stop left to a lower rank that waits too, once per call
  bool limit_probed_ = false;      // the call has been asked about since the time limit passed
  int64_t next_notice_at_ms_ = 0;  // its wait at which to tell the user again
  std::vector<std::unique_ptr<Outgoing>> outgoing_;
  char query_[32] = {};  // a question: its number, as text
  MPI_Request query_request_ = MPI_REQUEST_NULL;

  std::atomic<bool> quit_{false};
  std::thread thread_;
};

}  // namespace ts::distributed
