#pragma once
// The CPU tracer: string interning, per-thread event buffers, and the RAII Range.
// Recording costs two clock reads and an uncontended per-thread spinlock; when the tracer is
// disabled a Range costs one relaxed load.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "profiler/event.h"
#include "profiler/range_observer.h"
#include "vocabulary/clock.h"

namespace ts::profiler {

namespace detail {
struct ThreadBuffer;
struct Chunk;
}  // namespace detail

class Tracer {
 public:
  Tracer();
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // The process-wide tracer the engine and the training loop record into.
  static Tracer& global() {
    static Tracer tracer;
    return tracer;
  }

  // Same string -> same id; id 0 is "". Thread-safe. Ids stay valid for the tracer's life
  // (clear() keeps them: call sites cache them in statics).
  StringId intern(std::string_view s);
  // The interned string; the view stays valid for the tracer's life. Unknown id: std::out_of_range.
  std::string_view str(StringId id) const;
  size_t string_count() const;

  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // The current training iteration, stamped on every event by record().
  void set_iteration(int32_t i) { iteration_.store(i, std::memory_order_relaxed); }
  int32_t iteration() const { return iteration_.load(std::memory_order_relaxed); }

  // Appends to the calling thread's buffer; stamps `iteration` (the current one) and `thread`.
  // Records even when disabled: enabled() is for Range and other callers to check.
  void record(const Event& e);
  // As record(), but keeps e.iteration (events imported or replayed from elsewhere).
  void record_raw(const Event& e);

  // Moves out every buffered event of every thread, sorted by (start asc, end desc, thread):
  // an enclosing event comes before the events it contains. Safe while threads record; the
  // events they record after their buffer was taken wait for the next drain.
  std::vector<Event> drain();
  // Drops every buffered event and resets recorded_count(); interned strings stay.
  void clear();
  // Events recorded since construction or the last clear(), drained ones included.
  uint64_t recorded_count() const;
  // Threads that have recorded into this tracer (the `thread` ids are 0..thread_count()-1).
  size_t thread_count() const;
  // The calling thread's small id (the `thread` its events get), registering it if new.
  uint32_t current_thread();

 private:
  detail::ThreadBuffer& local_buffer();
  void push(const Event& e, int32_t iteration);
  std::unique_ptr<detail::Chunk> take_chunk();
  void give_back(std::vector<std::unique_ptr<detail::Chunk>>& chunks);

  std::atomic<bool> enabled_{false};
  std::atomic<int32_t> iteration_{-1};
  const uint64_t uid_;  // tells this tracer from others in the per-thread cache

  mutable std::shared_mutex strings_mutex_;
  std::deque<std::string> strings_;  // deque: elements never move, so views stay valid
  std::unordered_map<std::string_view, StringId> ids_;

  mutable std::mutex registry_mutex_;
  // Keyed by std::thread::id: a thread that starts after another exited may reuse its buffer
  // (and its small id), which bounds the number of buffers by the number of live threads.
  std::unordered_map<std::thread::id, std::unique_ptr<detail::ThreadBuffer>> buffers_;

  // Drained chunks are reused: fresh memory would cost a page fault every 128 events.
  std::mutex spare_mutex_;
  std::vector<std::unique_ptr<detail::Chunk>> spare_;
};

// RAII range on the global tracer: records [construction, destruction) as one event.
class Range {
 public:
  explicit Range(StringId name, EventKind kind, Pass pass = Pass::none, StringId layer = 0)
      : Range(Tracer::global(), name, kind, pass, layer) {}
  Range(Tracer& tracer, StringId name, EventKind kind, Pass pass = Pass::none, StringId layer = 0)
      : tracer_(tracer.enabled() ? &tracer : nullptr), name_(name), layer_(layer), kind_(kind), pass_(pass) {
    if (tracer_ != nullptr) {
      observer_ = range_observer();
      if (observer_ != nullptr) observer_->begin(kind, name, layer, pass, tracer.iteration());
      start_ns_ = vocabulary::now_ns();
    }
  }
  ~Range() {
    if (tracer_ != nullptr) {
      tracer_->record(Event{start_ns_, vocabulary::now_ns(), name_, layer_, kind_, pass_, 0, 0});
      if (observer_ != nullptr) observer_->end(kind_);
    }
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  Tracer* tracer_;
  RangeObserver* observer_ = nullptr;
  int64_t start_ns_ = 0;
  StringId name_;
  StringId layer_;
  EventKind kind_;
  Pass pass_;
};

}  // namespace ts::profiler
