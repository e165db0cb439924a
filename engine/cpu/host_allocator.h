#pragma once
// Host memory for CPU tensors. Blocks of 64 KiB and more are mapped one by one, cached by size
// class and reused instead of going back to the kernel: fresh pages cost a page fault each, and
// the faults on a 50 MB activation cost more than the convolution that fills it; the cache's
// bound keeps the footprint near the peak in use (a miss may take a block up to twice its size;
// the least recently freed blocks go first). Smaller blocks go to malloc, which caches them
// well.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ts::engine::cpu {

// A host allocation that cannot be served, like cuda::OutOfMemoryError on a device. It carries
// the request so that a caller knowing what the memory was for (Tensor::empty: the shape, the
// category, the owner) can say so.
class OutOfMemoryError : public std::runtime_error {
 public:
  OutOfMemoryError(const std::string& message, size_t requested_bytes)
      : std::runtime_error(message), requested_bytes_(requested_bytes) {}
  size_t requested_bytes() const { return requested_bytes_; }

 private:
  size_t requested_bytes_;
};

struct HostAllocatorStats {
  int64_t allocated_bytes = 0;  // handed out (rounded to the size class)
  int64_t cached_bytes = 0;     // free blocks kept for reuse
  int64_t hits = 0, misses = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t evicted_bytes = 0;  // cached blocks given back to keep the footprint bounded
};

// Throws OutOfMemoryError, naming the request, when the system refuses the block (after giving
// the cache back and trying once more), or when the block alone, or the blocks of 64 KiB and
// more handed out together with it, would pass host_memory_limit(): with overcommit such blocks
// are "allocated" and the process is killed while writing them.
void* host_allocate(size_t bytes);
void host_free(void* p, size_t bytes);
// Gives every cached block back to the system.
void host_empty_cache();
HostAllocatorStats host_allocator_stats();
// What handed-out plus cached bytes of 64 KiB and more are kept under, for a peak handed out.
int64_t host_cache_bound(int64_t peak_allocated_bytes);
// The peak starts again from what is handed out now (tests, which need a known bound).
void host_reset_peak();
// The size class a request of `bytes` is served from (exposed for tests); OutOfMemoryError
// when it, or the class, is larger than any object can be (PTRDIFF_MAX).
size_t host_size_class(size_t bytes);
// This machine's physical memory in bytes (sysconf).
size_t host_physical_memory_bytes();
// The bound on host memory handed out (see host_allocate): physical memory unless set; 0 sets
// it back. Tests lower it to reach the limit without filling the machine.
size_t host_memory_limit();
void host_set_memory_limit(size_t bytes);
// "1.50 GiB", "512 B": for messages.
std::string format_host_bytes(size_t bytes);

// Host buffers that are not tensors but are sized from user input (a batch staged on the host):
// the product of `dims` objects of `object_bytes` each, in checked arithmetic. Returns the object
// count; a negative dimension throws std::invalid_argument, a product beyond size_t or a buffer
// larger than host_memory_limit() OutOfMemoryError, both naming `what`.
size_t check_host_buffer(std::initializer_list<int64_t> dims, size_t object_bytes, std::string_view what);
// OutOfMemoryError for a host buffer of `bytes` for `what` that the system refused.
OutOfMemoryError host_buffer_refused(size_t bytes, std::string_view what);

// A value-initialised std::vector<T> of the product of `dims` elements, checked as above;
// OutOfMemoryError naming `what` and the bytes instead of std::bad_alloc.
template <class T>
std::vector<T> host_buffer(std::initializer_list<int64_t> dims, std::string_view what) {
  const size_t count = check_host_buffer(dims, sizeof(T), what);
  try {
    return std::vector<T>(count);
  } catch (const std::bad_alloc&) {
    throw host_buffer_refused(count * sizeof(T), what);
  }
}

}  // namespace ts::engine::cpu
