#include "engine/cpu/host_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ts::engine::cpu {

namespace {

constexpr size_t kAlignment = 64;  // cache line; what AVX-512 loads like
// Blocks of 64 KiB and more are cached, each its own mapping: glibc's heap kept the freed blocks
// under its dynamic mmap threshold (up to 32 MiB) and returned little of them, which added some
// 280 MiB of resident memory to the transformer's 430 MiB of tensors; mapped blocks leave the
// footprint to the bound below.
constexpr size_t kCacheFrom = size_t{64} << 10;
// Handed-out plus cached bytes stay under host_cache_bound: each size class keeps its own free
// list, and without a bound the classes' separate peaks (forward activations in some, gradients
// in others) added up to several times the real peak. 9/8 of the peak plus 32 MiB: the
// transformer `small` held 700 MiB of resident memory under 5/4 plus 64 MiB and 626 under this,
// 1-3% faster with the two rules below (docs/measurements.md, issue 43).
constexpr int64_t kCacheSlack = int64_t{32} << 20;

// A miss takes a cached block of a larger class, up to twice its own: a tensor whose size
// changes a little from step to step (the sequence workloads' tokens per batch) lands a class or
// two up or down, and a fresh mapping costs a page fault per 4 KiB. Up to 3/2 left inception_v3
// 9-12% slower than the old cache and seq2seq 13% slower than twice (docs/measurements.md).
constexpr size_t kLargerFactor = 2;

struct CachedBlock {
  void* p;
  uint64_t freed_at;  // Cache::clock when it was freed
};

struct Cache {
  std::mutex mutex;
  // By size class, oldest first: reuse takes the newest (warm in cache), eviction the oldest
  // of all classes (least recently used): evicting the largest first, as before, dropped the
  // blocks the next step wanted and mapped them again.
  std::unordered_map<size_t, std::vector<CachedBlock>> free_blocks;
  std::unordered_map<void*, size_t> lent_larger;  // blocks handed out for a smaller class: their class
  uint64_t clock = 0;
  HostAllocatorStats stats;
};

// The smallest cached class in (cls, cls * kLargerFactor], or 0.
size_t larger_cached_class(const Cache& c, size_t cls) {
  size_t best = 0;
  for (const auto& [k, blocks] : c.free_blocks) {
    if (!blocks.empty() && k > cls && k <= cls * kLargerFactor && (best == 0 || k < best)) best = k;
  }
  return best;
}

// Takes the newest cached block of class `cls` (which has one) for a request of class `asked`.
void* take_cached(Cache& c, size_t cls, size_t asked) {
  auto& blocks = c.free_blocks[cls];
  void* p = blocks.back().p;
  blocks.pop_back();
  if (cls != asked) c.lent_larger[p] = cls;
  c.stats.cached_bytes -= static_cast<int64_t>(cls);
  c.stats.allocated_bytes += static_cast<int64_t>(cls);
  c.stats.peak_allocated_bytes = std::max(c.stats.peak_allocated_bytes, c.stats.allocated_bytes);
  ++c.stats.hits;
  return p;
}

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: tensors may be freed during static destruction
  return *c;
}

// A cached-range block: a mapping of its own, one page longer than the class, starting at one of
// 64 cache-line offsets into its first page in turn. Page-aligned blocks put an op's inputs and
// output at the same offsets within a page, where loads and stores alias (4K aliasing) and
// compete for the same cache sets: the transformer ran 2-9% slower than with malloc's scattered
// addresses (three A/Bs), and staggered within the noise of malloc's (docs/measurements.md).
constexpr size_t kPage = 4096;
std::atomic<size_t> g_next_color{0};
void* map_block(size_t cls) {
  void* base = mmap(nullptr, cls + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  const size_t color = (g_next_color.fetch_add(1) * 17 % (kPage / kAlignment)) * kAlignment;
  return static_cast<char*>(base) + color;
}
void unmap_block(void* p, size_t cls) {
  munmap(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~(kPage - 1)), cls + kPage);
}
void* get_block(size_t cls) { return cls >= kCacheFrom ? map_block(cls) : std::aligned_alloc(kAlignment, cls); }

// Frees cached blocks, the least recently freed first, until handed-out + cached, counting the
// `incoming` block about to be allocated, fits the bound.
void evict_over_bound(Cache& c, int64_t incoming) {
  const int64_t allocated = c.stats.allocated_bytes + incoming;
  const int64_t bound = host_cache_bound(std::max(c.stats.peak_allocated_bytes, allocated));
  while (c.stats.cached_bytes > 0 && allocated + c.stats.cached_bytes > bound) {
    auto oldest = c.free_blocks.end();
    for (auto it = c.free_blocks.begin(); it != c.free_blocks.end(); ++it) {
      if (!it->second.empty() &&
          (oldest == c.free_blocks.end() || it->second.front().freed_at < oldest->second.front().freed_at)) {
        oldest = it;
      }
    }
    unmap_block(oldest->second.front().p, oldest->first);
    oldest->second.erase(oldest->second.begin());
    c.stats.cached_bytes -= static_cast<int64_t>(oldest->first);
    c.stats.evicted_bytes += static_cast<int64_t>(oldest->first);
  }
}

std::atomic<size_t> g_memory_limit{0};  // 0: physical memory

// "this machine's 23.5 GiB of physical memory", or the limit a test set.
std::string limit_words() {
  const size_t limit = host_memory_limit();
  if (limit == host_physical_memory_bytes())
    return "this machine's " + format_host_bytes(limit) + " of physical memory";
  return "the host memory limit of " + format_host_bytes(limit);
}

OutOfMemoryError refusal(size_t bytes, const std::string& why) {
  return OutOfMemoryError(
      "cannot allocate " + format_host_bytes(bytes) + " (" + std::to_string(bytes) + " bytes) of host memory: " + why,
      bytes);
}

}  // namespace

std::string format_host_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  auto v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

size_t host_physical_memory_bytes() {
  static const size_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    size_t total = 0;
    // Unknown (or not representable): no bound rather than a wrong one.
    if (pages <= 0 || page_size <= 0 ||
        __builtin_mul_overflow(static_cast<size_t>(pages), static_cast<size_t>(page_size), &total)) {
      return SIZE_MAX;
    }
    return total;
  }();
  return bytes;
}

size_t host_memory_limit() {
  const size_t set = g_memory_limit.load();
  return set ? set : host_physical_memory_bytes();
}

void host_set_memory_limit(size_t bytes) { g_memory_limit.store(bytes); }

size_t host_size_class(size_t bytes) {
  // No object may be larger than PTRDIFF_MAX; up to there, the rounding below cannot wrap around.
  constexpr auto kLargestObject = static_cast<size_t>(PTRDIFF_MAX);
  if (bytes > kLargestObject) throw refusal(bytes, "larger than any object can be");
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < kCacheFrom) return rounded == 0 ? kAlignment : rounded;
  // Four classes per power of two: at most 25% rounding waste.
  const size_t top = std::bit_floor(rounded);
  const size_t step = top / 4;
  const size_t cls = (rounded + step - 1) / step * step;
  if (cls > kLargestObject) throw refusal(bytes, "its size class is larger than any object can be");
  return cls;
}

void* host_allocate(size_t bytes) {
  const size_t cls = host_size_class(bytes);
  const size_t limit = host_memory_limit();
  if (bytes > limit) throw refusal(bytes, "more than " + limit_words());
  const auto cls_bytes = static_cast<int64_t>(cls);  // fits: host_size_class keeps to PTRDIFF_MAX
  auto& c = cache();
  if (cls >= kCacheFrom) {
    std::lock_guard lock(c.mutex);
    auto it = c.free_blocks.find(cls);
    if (it != c.free_blocks.end() && !it->second.empty()) return take_cached(c, cls, cls);
    if (const size_t larger = larger_cached_class(c, cls); larger != 0) return take_cached(c, larger, cls);
    const auto in_use = static_cast<size_t>(c.stats.allocated_bytes);
    if (in_use + cls > limit) {
      throw refusal(bytes, "with the " + format_host_bytes(in_use) + " of blocks of 64 KiB and more already in use, " +
                               "more than " + limit_words());
    }
    ++c.stats.misses;
    evict_over_bound(c, cls_bytes);
  }
  void* p = get_block(cls);
  if (!p) {
    // The cached blocks of other classes may be what the system lacks: give them back, try again.
    host_empty_cache();
    p = get_block(cls);
  }
  if (!p) {
    const auto st = host_allocator_stats();
    throw refusal(bytes, "the system refused it, even after the allocator's cache was given back (blocks of 64 KiB "
                         "and more in use: " +
                             format_host_bytes(static_cast<size_t>(st.allocated_bytes)) + ")");
  }
  if (cls >= kCacheFrom) {
    // Counted once the block exists, so that a refused request leaves the books as they were.
    std::lock_guard lock(c.mutex);
    c.stats.allocated_bytes += cls_bytes;
    c.stats.peak_allocated_bytes = std::max(c.stats.peak_allocated_bytes, c.stats.allocated_bytes);
  }
  return p;
}

size_t check_host_buffer(std::initializer_list<int64_t> dims, size_t object_bytes, std::string_view what) {
  std::string shape;
  for (int64_t d : dims) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
  bool any_zero = false;
  for (int64_t d : dims) {
    if (d < 0) throw std::invalid_argument(std::string(what) + ": negative size in " + shape);
    any_zero = any_zero || d == 0;
  }
  if (any_zero) return 0;
  size_t count = 1, bytes = 0;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(count, static_cast<size_t>(d), &count)) {
      throw OutOfMemoryError(std::string(what) + ": " + shape + " elements overflow a 64-bit count", SIZE_MAX);
    }
  }
  if (__builtin_mul_overflow(count, object_bytes, &bytes)) {
    throw OutOfMemoryError(std::string(what) + ": " + shape + " elements of " + std::to_string(object_bytes) +
                               " bytes overflow a 64-bit byte count",
                           SIZE_MAX);
  }
  if (bytes > host_memory_limit()) {
    throw OutOfMemoryError(std::string(what) + " (" + shape + " elements) needs " + format_host_bytes(bytes) + " (" +
                               std::to_string(bytes) + " bytes), more than " + limit_words(),
                           bytes);
  }
  return count;
}

OutOfMemoryError host_buffer_refused(size_t bytes, std::string_view what) {
  return OutOfMemoryError(std::string(what) + ": the system refused " + format_host_bytes(bytes) + " (" +
                              std::to_string(bytes) + " bytes) of host memory",
                          bytes);
}

void host_free(void* p, size_t bytes) {
  if (!p) return;
  size_t cls = host_size_class(bytes);
  if (cls < kCacheFrom) {
    std::free(p);
    return;
  }
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  if (auto it = c.lent_larger.find(p); it != c.lent_larger.end()) {
    cls = it->second;
    c.lent_larger.erase(it);
  }
  c.free_blocks[cls].push_back({p, ++c.clock});
  c.stats.cached_bytes += static_cast<int64_t>(cls);
  c.stats.allocated_bytes -= static_cast<int64_t>(cls);
}

void host_empty_cache() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  for (auto& [cls, blocks] : c.free_blocks) {
    for (const CachedBlock& b : blocks) unmap_block(b.p, cls);
  }
  c.free_blocks.clear();
  c.stats.cached_bytes = 0;
}

int64_t host_cache_bound(int64_t peak_allocated_bytes) { return peak_allocated_bytes / 8 * 9 + kCacheSlack; }

void host_reset_peak() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  c.stats.peak_allocated_bytes = c.stats.allocated_bytes;
}

HostAllocatorStats host_allocator_stats() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  return c.stats;
}

}  // namespace ts::engine::cpu
