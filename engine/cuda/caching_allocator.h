#pragma once
// The caching device allocator. cudaMalloc/cudaFree cost tens of microseconds to milliseconds
// and cudaFree synchronises the whole device, so blocks are kept after a tensor lets go and
// handed to the next request of a fitting size on the same stream (stream order makes that
// reuse safe without events). The core is plain C++ over two raw functions, so its policy is
// tested on any machine; device_memory.cpp instantiates it over cudaMalloc/cudaFree.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

#include "vocabulary/memory_category.h"

namespace ts::engine::cuda {

struct AllocatorStats {
  int64_t reserved_bytes = 0;   // obtained from the device (cudaMalloc), live or cached
  int64_t used_bytes = 0;       // handed out to tensors (block sizes, after rounding)
  int64_t requested_bytes = 0;  // what callers asked for (before rounding)
  int64_t peak_reserved_bytes = 0;
  int64_t peak_used_bytes = 0;
  int64_t allocations = 0;     // allocate() calls with bytes > 0
  int64_t cache_hits = 0;      // served from a cached block
  int64_t device_mallocs = 0;  // raw allocations
  int64_t device_frees = 0;    // raw frees (empty_cache, OOM retry)
  int64_t oom_retries = 0;     // raw allocation failed, cache emptied, tried again
};

// Thrown when the device is out of memory even after the cache was emptied.
class OutOfMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CachingAllocator {
 public:
  // Returns nullptr when the device is out of memory; throws for any other failure.
  using RawAlloc = std::function<void*(size_t bytes)>;
  using RawFree = std::function<void(void* p)>;
  // Extra words for an out-of-memory message (e.g. the device's free/total memory).
  using DeviceInfo = std::function<std::string()>;
  // Streams are opaque keys here (a cudaStream_t cast to an integer).
  using StreamKey = uintptr_t;

  static constexpr size_t kSmallLimit = size_t{1} << 20;  // requests up to 1 MiB are "small"
  static constexpr size_t kSmallRound = 512;              // small requests round up to 512 B
  static constexpr size_t kLargeRound = size_t{2} << 20;  // large ones to whole 2 MiB

  CachingAllocator(std::string device_label, RawAlloc alloc, RawFree free, DeviceInfo info = {});
  ~CachingAllocator();  // returns cached blocks to the device; live blocks are the owners' business
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` for work ordered on `stream`; nullptr for 0 bytes.
  // `category` and `owner` only name the request in an out-of-memory error.
  void* allocate(size_t bytes, StreamKey stream, vocabulary::Category category, std::string_view owner);
  // Returns a block to its stream's cache. Unknown pointer: std::logic_error.
  void free(void* p);
  // Gives every cached (free) block back to the device.
  void empty_cache();

  AllocatorStats stats() const;
  void reset_peaks();  // peaks become the current values
  // Bytes held in the cache (reserved - used).
  int64_t cached_bytes() const;

  // The block size a request of `bytes` is served with.
  static size_t round_size(size_t bytes);
  // Whether a cached block of `block` bytes may serve a request rounded to `rounded`:
  // at most a quarter larger, so that a big free block is not wasted on a small request.
  static bool fits(size_t block, size_t rounded) { return block >= rounded && block - rounded <= rounded / 4; }

 private:
  struct Block {
    size_t size;
    StreamKey stream;
  };
  void* take_cached(size_t rounded, StreamKey stream);  // nullptr when none fits
  void release_cache_locked();
  std::string oom_message(size_t bytes, size_t rounded, vocabulary::Category category, std::string_view owner) const;
  void update_peaks();

  std::string label_;
  RawAlloc raw_alloc_;
  RawFree raw_free_;
  DeviceInfo info_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> live_;                     // handed out
  std::map<StreamKey, std::multimap<size_t, void*>> cached_;  // free, per stream, by size
  std::unordered_map<void*, size_t> requested_;               // live: the caller's size
  AllocatorStats stats_;
};

// "1.50 GiB", "512 B": for messages.
std::string format_bytes(int64_t bytes);

}  // namespace ts::engine::cuda
