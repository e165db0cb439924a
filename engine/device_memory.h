#pragma once
// The memory of a device other than the host, beside backend_for (backend.h): what Storage and
// Tensor need from it (allocation, host copies, zeroing) and whether the device can be used,
// without any backend's headers. backend_registry.cpp, the one file that knows every backend of
// the build, hands out each device's.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/device.h"
#include "vocabulary/memory_category.h"

namespace ts::engine {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Out of memory: an exception naming the request and what holds the device's memory.
  virtual void* allocate(int64_t bytes, vocabulary::Category category, std::string_view owner) = 0;
  virtual void release(void* p) noexcept = 0;
  // copy_from_host returns once `src` may be reused; copy_to_host waits for the data (and for
  // the work queued before it).
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* p, size_t bytes) = 0;
};

// The memory of `device` (a GPU); std::runtime_error when this build has no backend for it.
DeviceMemory& memory_for(Device device);

// Whether work can run on `device` in this build on this machine; otherwise `why` (when given)
// says why not. The CPU always can; meta never runs work.
bool device_usable(Device device, std::string* why = nullptr);

// The host allocator's cache (CPU blocks of 64 KiB and more), counted since the process began:
// a miss is a block fresh from the system. What a run records, without the CPU backend's headers.
struct HostCacheStats {
  int64_t hits = 0, misses = 0;
  int64_t evicted_bytes = 0;  // cached blocks given back to keep the footprint bounded
};
HostCacheStats host_cache_stats();

// A GPU's memory as its allocator books it and as the driver sees it, and whether TF32 is
// allowed; `available` false for a device that has none (the host, meta, a build without CUDA).
struct DeviceMemoryStats {
  bool available = false;
  int64_t reserved_peak_bytes = 0, used_peak_bytes = 0, reserved_bytes = 0;
  bool driver_ok = false;  // the driver answered (cudaMemGetInfo)
  int64_t driver_free_bytes = 0, driver_total_bytes = 0;
  bool tf32_allowed = false;
};
DeviceMemoryStats device_memory_stats(Device device);

}  // namespace ts::engine
