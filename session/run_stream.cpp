#include "session/run_stream.h"

#include <algorithm>

#include "distributed/communicator.h"
#include "fmt/format.h"
#include "profiler/analysis.h"
#include "profiler/tracer.h"
#include "session/rank_channel.h"
#include "session/rank_records.h"
#include "session/record.h"
#include "store/liveness.h"

namespace ts::session {

namespace {

template <class T>
void append(std::vector<T>& to, std::vector<T>&& from) {
  if (to.empty()) {
    to = std::move(from);
  } else {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  }
}

// A flush waits for another process's lock only briefly: its rows are kept for the next one.
constexpr std::chrono::milliseconds kFlushLockWait{1000};

// How long a run may go without a new iteration before readers call it stalled (store/liveness.h):
// twenty of its longest iterations, at least 5 minutes (building a model, an evaluation, the
// final write and the other ranks' records all pass without iterations).
constexpr int64_t kStallAfterFloorMs = 300'000;
constexpr int64_t kStallAfterIterations = 20;

}  // namespace

DbSink::DbSink(const std::filesystem::path& db, int64_t run_id, RankChannel* gather)
    : writer_(db, kFlushLockWait), run_(run_id), gather_(gather) {}

DbSink::~DbSink() = default;

void DbSink::write(const store::RunFlush& rows) {
  if (gather_) {
    for (auto& p : gather_->poll()) unwritten_.push_back(std::move(p));
  }
  store::Writer::Transaction tx(writer_);
  writer_.flush(run_, rows);
  for (const auto& p : unwritten_) writer_.flush(run_, p.flush);
  tx.commit();
  for (auto& p : unwritten_) {
    if (!p.final) continue;
    p.flush = {};
    finals_.push_back(std::move(p));
  }
  unwritten_.clear();
}

std::vector<RankPayload> DbSink::take_remote() {
  std::vector<RankPayload> out = std::move(unwritten_);
  unwritten_.clear();
  for (auto& f : finals_) out.push_back(std::move(f));
  finals_.clear();
  return out;
}

void RankSink::write(const store::RunFlush& rows) {
  RankPayload p;
  p.rank = channel_.rank();
  p.flush = rows;
  channel_.send(p);
}

RunStream::RunStream(std::unique_ptr<FlushSink> sink, const collectors::ProcessSampler& sampler, Options options)
    : sink_(std::move(sink)), sampler_(sampler), options_(options) {
  thread_ = std::thread([this] { loop(); });
}

RunStream::~RunStream() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RunStream::add_iteration(const workloads::IterationResult& it) {
  std::lock_guard lock(mutex_);
  iterations_.push_back(to_iteration_row(it));
  longest_iteration_ns_ = std::max(longest_iteration_ns_, it.end_ns - it.start_ns);
}

void RunStream::loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, options_.interval, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    flush_once();
    lock.lock();
  }
}

void RunStream::flush_once() {
  store::RunFlush batch;
  int64_t longest_ns = 0;
  // The trace first, then the iterations: every phase drained belongs to an iteration taken here
  // or to the one in flight (taken the other way round, the training thread could finish an
  // iteration and the next one's phases in between, and a reader would see phases two ahead).
  auto& tracer = profiler::Tracer::global();
  std::vector<profiler::Event> events = tracer.drain();
  {
    std::lock_guard lock(mutex_);
    batch.iterations.swap(iterations_);
    longest_ns = longest_iteration_ns_;
  }
  append_event_rows(events, profiler::lookup_in(tracer), batch.phases, batch.events);
  append(events_, std::move(events));
  for (auto& s : sampler_.samples_since(sample_cursor_)) batch.samples.push_back({s.t_ns, std::move(s.name), s.value});
  append_memory_points(memprof::Ledger::global().timeline_since(memory_cursor_, options_.memory_points_per_flush),
                       batch.memory);
  for (distributed::Communicator* communicator : options_.communicators) {
    if (!communicator) continue;
    std::vector<distributed::CollectiveRecord> calls = communicator->take_records();
    append_collective_rows(calls, batch.collectives);
    append(calls_, std::move(calls));
  }

  // Rows a failed flush left come first, so each table stays in the order it was measured.
  append(unwritten_.iterations, std::move(batch.iterations));
  append(unwritten_.phases, std::move(batch.phases));
  append(unwritten_.events, std::move(batch.events));
  append(unwritten_.memory, std::move(batch.memory));
  append(unwritten_.samples, std::move(batch.samples));
  append(unwritten_.collectives, std::move(batch.collectives));
  unwritten_.heartbeat_ms = store::unix_time_ms();
  if (!batch.iterations.empty()) {
    // The run advanced: readers call it stalled once the heartbeat goes on this long without.
    unwritten_.progress_ms = unwritten_.heartbeat_ms;
    unwritten_.stall_after_ms = std::max(kStallAfterFloorMs, kStallAfterIterations * longest_ns / 1'000'000);
  }
  try {
    sink_->write(unwritten_);
    unwritten_ = {};
    std::lock_guard lock(mutex_);
    ++stats_.flushes;
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    if (stats_.failed_flushes++ == 0)
      tell(options_.notice,
           fmt::format("\ntrainscope: could not write the run as it goes ({}); its rows are kept for the next try\n",
                       e.what()));
    stats_.last_error = e.what();
  }
}

std::vector<profiler::Event> RunStream::finish() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  flush_once();  // the thread is gone: what it has not written yet, now
  std::vector<profiler::Event> all = std::move(events_);
  // Each drain is sorted; an enclosing range ends (and is drained) after what it contains.
  std::stable_sort(all.begin(), all.end(), profiler::trace_order);
  return all;
}

store::RunFlush RunStream::take_unwritten() { return std::exchange(unwritten_, {}); }

RunStream::Stats RunStream::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace ts::session
