#include "profiler/tracer.h"

#include <algorithm>
#include <array>
#include <stdexcept>

namespace ts::profiler {

namespace detail {

inline constexpr size_t kChunkEvents = 4096;   // 128 KiB per chunk
inline constexpr size_t kMaxSpareChunks = 64;  // 8 MiB kept for reuse after a drain

struct Chunk {
  std::array<Event, kChunkEvents> events;
};

// One thread's events, in fixed-size chunks: a push never moves recorded events.
// The spinlock is uncontended except while drain()/clear() take the chunks.
struct ThreadBuffer {
  explicit ThreadBuffer(uint32_t id) : thread_id(id) {}

  void lock() {
    for (int spins = 0; flag.test_and_set(std::memory_order_acquire); ++spins) {
      if (spins > 64) std::this_thread::yield();
    }
  }
  void unlock() { flag.clear(std::memory_order_release); }

  std::atomic_flag flag = ATOMIC_FLAG_INIT;
  const uint32_t thread_id;
  std::vector<std::unique_ptr<Chunk>> chunks;  // guarded by flag
  size_t used_in_last = kChunkEvents;          // guarded by flag; full = "allocate on next push"
  uint64_t recorded = 0;                       // guarded by flag
};

}  // namespace detail

namespace {

std::atomic<uint64_t> g_next_tracer_uid{1};

struct LocalCache {
  uint64_t tracer_uid = 0;
  detail::ThreadBuffer* buffer = nullptr;
};
thread_local LocalCache t_cache;

}  // namespace

Tracer::Tracer() : uid_(g_next_tracer_uid.fetch_add(1, std::memory_order_relaxed)) {
  strings_.emplace_back();
  ids_.emplace(std::string_view(strings_.back()), 0);
}

Tracer::~Tracer() = default;

StringId Tracer::intern(std::string_view s) {
  {
    std::shared_lock lock(strings_mutex_);
    if (auto it = ids_.find(s); it != ids_.end()) return it->second;
  }
  std::unique_lock lock(strings_mutex_);
  if (auto it = ids_.find(s); it != ids_.end()) return it->second;
  const auto id = static_cast<StringId>(strings_.size());
  strings_.emplace_back(s);
  ids_.emplace(std::string_view(strings_.back()), id);
  return id;
}

std::string_view Tracer::str(StringId id) const {
  std::shared_lock lock(strings_mutex_);
  if (id >= strings_.size()) throw std::out_of_range("profiler: unknown string id " + std::to_string(id));
  return strings_[id];
}

size_t Tracer::string_count() const {
  std::shared_lock lock(strings_mutex_);
  return strings_.size();
}

detail::ThreadBuffer& Tracer::local_buffer() {
  if (t_cache.tracer_uid == uid_) return *t_cache.buffer;
  std::lock_guard lock(registry_mutex_);
  auto& slot = buffers_[std::this_thread::get_id()];
  if (!slot) slot = std::make_unique<detail::ThreadBuffer>(static_cast<uint32_t>(buffers_.size() - 1));
  t_cache = {uid_, slot.get()};
  return *slot;
}

uint32_t Tracer::current_thread() { return local_buffer().thread_id; }

void Tracer::push(const Event& e, int32_t iteration) {
  detail::ThreadBuffer& b = local_buffer();
  b.lock();
  if (b.used_in_last == detail::kChunkEvents) {
    b.chunks.push_back(take_chunk());  // once per 4096 events
    b.used_in_last = 0;
  }
  Event& slot = b.chunks.back()->events[b.used_in_last++];
  slot = e;
  slot.iteration = iteration;
  slot.thread = b.thread_id;
  ++b.recorded;
  b.unlock();
}

void Tracer::record(const Event& e) { push(e, iteration()); }

void Tracer::record_raw(const Event& e) { push(e, e.iteration); }

std::vector<Event> Tracer::drain() {
  struct Taken {
    std::vector<std::unique_ptr<detail::Chunk>> chunks;
    size_t used_in_last;
  };
  std::vector<Taken> taken;
  {
    std::lock_guard lock(registry_mutex_);
    taken.reserve(buffers_.size());
    for (auto& [tid, b] : buffers_) {
      b->lock();
      taken.push_back({std::move(b->chunks), b->used_in_last});
      b->chunks.clear();
      b->used_in_last = detail::kChunkEvents;
      b->unlock();
    }
  }
  size_t total = 0;
  for (const auto& t : taken) {
    if (!t.chunks.empty()) total += (t.chunks.size() - 1) * detail::kChunkEvents + t.used_in_last;
  }
  std::vector<Event> out;
  out.reserve(total);
  for (const auto& t : taken) {
    for (size_t c = 0; c < t.chunks.size(); ++c) {
      const size_t n = c + 1 == t.chunks.size() ? t.used_in_last : detail::kChunkEvents;
      out.insert(out.end(), t.chunks[c]->events.begin(), t.chunks[c]->events.begin() + static_cast<std::ptrdiff_t>(n));
    }
  }
  for (auto& t : taken) give_back(t.chunks);
  std::sort(out.begin(), out.end(), trace_order);
  return out;
}

void Tracer::clear() {
  std::vector<std::unique_ptr<detail::Chunk>> dropped;
  {
    std::lock_guard lock(registry_mutex_);
    for (auto& [tid, b] : buffers_) {
      b->lock();
      for (auto& c : b->chunks) dropped.push_back(std::move(c));
      b->chunks.clear();
      b->used_in_last = detail::kChunkEvents;
      b->recorded = 0;
      b->unlock();
    }
  }
  give_back(dropped);
}

std::unique_ptr<detail::Chunk> Tracer::take_chunk() {
  {
    std::lock_guard lock(spare_mutex_);
    if (!spare_.empty()) {
      auto c = std::move(spare_.back());
      spare_.pop_back();
      return c;
    }
  }
  return std::make_unique_for_overwrite<detail::Chunk>();
}

void Tracer::give_back(std::vector<std::unique_ptr<detail::Chunk>>& chunks) {
  std::lock_guard lock(spare_mutex_);
  for (auto& c : chunks) {
    if (spare_.size() >= detail::kMaxSpareChunks) break;
    spare_.push_back(std::move(c));
  }
  chunks.clear();
}

uint64_t Tracer::recorded_count() const {
  std::lock_guard lock(registry_mutex_);
  uint64_t n = 0;
  for (const auto& [tid, b] : buffers_) {
    b->lock();
    n += b->recorded;
    b->unlock();
  }
  return n;
}

size_t Tracer::thread_count() const {
  std::lock_guard lock(registry_mutex_);
  return buffers_.size();
}

}  // namespace ts::profiler
