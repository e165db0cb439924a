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
#include "memprof/category.h"

namespace ts::engine {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Out of memory: an exception naming the request and what holds the device's memory.
  virtual void* allocate(int64_t bytes, memprof::Category category, std::string_view owner) = 0;
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

}  // namespace ts::engine
