#include "engine/cpu/host_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace ts::engine::cpu {

namespace {

constexpr size_t kAlignment = 64;               // cache line; what AVX-512 loads like
constexpr size_t kCacheFrom = size_t{1} << 20;  // blocks of 1 MiB and more are cached
// Handed-out plus cached bytes stay under 5/4 of the peak handed out plus this slack: each
// size class keeps its own free list, and without a bound the classes' separate peaks (forward
// activations in some, gradients in others) added up to several times the real peak.
constexpr int64_t kCacheSlack = int64_t{64} << 20;

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;   // by size class
  HostAllocatorStats stats;
};

Cache& cache() {
  static Cache* c = new Cache();   // never destroyed: tensors may be freed during static destruction
  return *c;
}

// Frees cached blocks, largest class first, until handed-out + cached fits the bound.
void evict_over_bound(Cache& c) {
  const int64_t bound = c.stats.peak_allocated_bytes / 4 * 5 + kCacheSlack;
  while (c.stats.cached_bytes > 0 && c.stats.allocated_bytes + c.stats.cached_bytes > bound) {
    auto largest = c.free_blocks.end();
    for (auto it = c.free_blocks.begin(); it != c.free_blocks.end(); ++it) {
      if (!it->second.empty() && (largest == c.free_blocks.end() || it->first > largest->first)) largest = it;
    }
    std::free(largest->second.back());
    largest->second.pop_back();
    c.stats.cached_bytes -= static_cast<int64_t>(largest->first);
    c.stats.evicted_bytes += static_cast<int64_t>(largest->first);
  }
}

}  // namespace

size_t host_size_class(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < kCacheFrom) return rounded == 0 ? kAlignment : rounded;
  // Four classes per power of two: at most 25% rounding waste.
  const size_t top = std::bit_floor(rounded);
  const size_t step = top / 4;
  return (rounded + step - 1) / step * step;
}

void* host_allocate(size_t bytes) {
  const size_t cls = host_size_class(bytes);
  if (cls >= kCacheFrom) {
    auto& c = cache();
    std::lock_guard lock(c.mutex);
    auto it = c.free_blocks.find(cls);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.cached_bytes -= static_cast<int64_t>(cls);
      c.stats.allocated_bytes += static_cast<int64_t>(cls);
      ++c.stats.hits;
      return p;
    }
    ++c.stats.misses;
    c.stats.allocated_bytes += static_cast<int64_t>(cls);
    c.stats.peak_allocated_bytes = std::max(c.stats.peak_allocated_bytes, c.stats.allocated_bytes);
    evict_over_bound(c);
  }
  void* p = std::aligned_alloc(kAlignment, cls);
  if (!p) throw std::bad_alloc();
  return p;
}

void host_free(void* p, size_t bytes) {
  if (!p) return;
  const size_t cls = host_size_class(bytes);
  if (cls < kCacheFrom) {
    std::free(p);
    return;
  }
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  c.free_blocks[cls].push_back(p);
  c.stats.cached_bytes += static_cast<int64_t>(cls);
  c.stats.allocated_bytes -= static_cast<int64_t>(cls);
}

void host_empty_cache() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  for (auto& [cls, blocks] : c.free_blocks) {
    for (void* p : blocks) std::free(p);
  }
  c.free_blocks.clear();
  c.stats.cached_bytes = 0;
}

HostAllocatorStats host_allocator_stats() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  return c.stats;
}

}  // namespace ts::engine::cpu
