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
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/process_sampler.h"
#include "memprof/ledger.h"
#include "profiler/event.h"
#include "store/records.h"
#include "store/writer.h"
#include "workloads/training_loop.h"

namespace ts::cli {

class RunStream {
 public:
  struct Options {
    std::chrono::milliseconds interval{2000};
    size_t memory_points_per_flush = 32;  // the streamed timeline; the final write replaces it
  };
  // Starts the flush thread. Throws StoreError when the db cannot be opened.
  RunStream(const std::filesystem::path& db, int64_t run_id, const collectors::ProcessSampler& sampler,
            Options options);
  ~RunStream();  // stops the thread (without the last flush finish() does)
  RunStream(const RunStream&) = delete;
  RunStream& operator=(const RunStream&) = delete;

  // From the training loop: a finished iteration, written at the next flush.
  void add_iteration(const workloads::IterationResult& it);

  // Stops the thread after a last flush. Returns every event drained over the run, in the
  // tracer's order (start, then the enclosing first), for the run's analyses.
  std::vector<profiler::Event> finish();
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

  store::Writer writer_;  // the flush thread's own connection
  const int64_t run_;
  const collectors::ProcessSampler& sampler_;
  const Options options_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<store::IterationRow> iterations_;  // guarded by mutex_: handed over by add_iteration
  Stats stats_;                                   // guarded by mutex_

  // Touched by the flush thread only (by finish() after it stopped).
  std::vector<profiler::Event> events_;
  store::RunFlush unwritten_;
  size_t sample_cursor_ = 0;
  memprof::Ledger::TimelineCursor memory_cursor_;
  std::thread thread_;
};

}  // namespace ts::cli
