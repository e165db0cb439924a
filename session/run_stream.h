#pragma once
// Writes a run while it runs. Every `interval` a thread of its own takes what was measured
// since the last flush (finished iterations, the tracer's events and phases, the memory
// ledger's changes, the sampler's samples) and writes it, with the run's heartbeat, in one
// transaction on a connection of its own. A run killed at any moment keeps everything up to
// its last flush; the training threads only hand over finished iterations.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/process_sampler.h"
#include "distributed/communicator.h"
#include "memprof/ledger.h"
#include "profiler/event.h"
#include "session/notice.h"
#include "store/records.h"
#include "store/writer.h"
#include "workloads/training_loop.h"

namespace ts::session {

class RankChannel;
struct RankPayload;

// Where a flush goes. write() throws when it could not: the rows are kept for the next flush.
class FlushSink {
 public:
  virtual ~FlushSink() = default;
  virtual void write(const store::RunFlush& rows) = 0;
};

// The run's db, on a connection of its own. On rank 0 of a distributed run it also writes the
// other ranks' flushes (received on `gather`) in the same transaction, and keeps their final
// messages' summaries for the run's final write.
class DbSink final : public FlushSink {
 public:
  DbSink(const std::filesystem::path& db, int64_t run_id, RankChannel* gather = nullptr);
  ~DbSink() override;
  void write(const store::RunFlush& rows) override;
  // Received but not yet written (the db was locked), and the final messages received, whose
  // flushes were written and whose summaries were not: the final write's to do.
  std::vector<RankPayload> take_remote();

 private:
  store::Writer writer_;
  const int64_t run_;
  RankChannel* gather_;
  std::vector<RankPayload> unwritten_;  // other ranks' flushes not yet written
  std::vector<RankPayload> finals_;     // their summaries (flushes emptied once written)
};

// A rank other than 0: every flush goes to rank 0.
class RankSink final : public FlushSink {
 public:
  explicit RankSink(RankChannel& channel) : channel_(channel) {}
  void write(const store::RunFlush& rows) override;

 private:
  RankChannel& channel_;
};

class RunStream {
 public:
  struct Options {
    std::chrono::milliseconds interval{2000};
    size_t memory_points_per_flush = 32;  // the streamed timeline; the final write replaces it
    std::vector<distributed::Communicator*>
        communicators;  // whose collectives are streamed (distributed runs; null ones skipped)
    Notice notice;      // told once when a flush first fails
  };
  // Starts the flush thread.
  RunStream(std::unique_ptr<FlushSink> sink, const collectors::ProcessSampler& sampler, Options options);
  ~RunStream();  // stops the thread (without the last flush finish() does)
  RunStream(const RunStream&) = delete;
  RunStream& operator=(const RunStream&) = delete;

  // From the training loop: a finished iteration, written at the next flush.
  void add_iteration(const workloads::IterationResult& it);

  // Stops the thread after a last flush. Returns every event drained over the run, in the
  // tracer's order (start, then the enclosing first), for the run's analyses.
  std::vector<profiler::Event> finish();
  FlushSink& sink() { return *sink_; }
  // Every collective call streamed over the run (after finish()), for the run's summaries.
  const std::vector<distributed::CollectiveRecord>& collectives() const { return calls_; }
  // What the flushes could not write (the db was locked or failed): the final write's to do.
  store::RunFlush take_unwritten();

  struct Stats {
    int64_t flushes = 0;         // committed
    int64_t failed_flushes = 0;  // their rows wait for the next flush
    std::string last_error;
  };
  Stats stats() const;

 private:
  void loop();
  void flush_once();  // on the flush thread, or on the caller's after it stopped

  std::unique_ptr<FlushSink> sink_;  // written by the flush thread only (by finish() after it stopped)
  const collectors::ProcessSampler& sampler_;
  const Options options_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<store::IterationRow> iterations_;  // guarded by mutex_: handed over by add_iteration
  int64_t longest_iteration_ns_ = 0;             // guarded by mutex_
  Stats stats_;                                  // guarded by mutex_

  // Touched by the flush thread only (by finish() after it stopped).
  std::vector<profiler::Event> events_;
  std::vector<distributed::CollectiveRecord> calls_;
  store::RunFlush unwritten_;
  size_t sample_cursor_ = 0;
  memprof::Ledger::TimelineCursor memory_cursor_;
  std::thread thread_;
};

}  // namespace ts::session
