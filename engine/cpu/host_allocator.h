#pragma once
// Host memory for CPU tensors. Large blocks are cached by size class and reused instead of
// going back to the kernel: glibc serves blocks above its mmap threshold (<= 32 MiB) with
// fresh pages every time, and the page faults on a 50 MB activation cost more than the
// convolution that fills it. Small blocks go straight to malloc, which caches them well.
#include <cstddef>
#include <cstdint>

namespace ts::engine::cpu {

struct HostAllocatorStats {
  int64_t allocated_bytes = 0;   // handed out (rounded to the size class)
  int64_t cached_bytes = 0;      // free blocks kept for reuse
  int64_t hits = 0, misses = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t evicted_bytes = 0;     // cached blocks given back to keep the footprint bounded
};

void* host_allocate(size_t bytes);
void host_free(void* p, size_t bytes);
// Gives every cached block back to the system.
void host_empty_cache();
HostAllocatorStats host_allocator_stats();
// The size class a request of `bytes` is served from (exposed for tests).
size_t host_size_class(size_t bytes);

}  // namespace ts::engine::cpu
