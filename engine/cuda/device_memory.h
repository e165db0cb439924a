#pragma once
// The CUDA backend's device memory and device queries, without any CUDA header: what
// backend_registry.cpp wraps as engine/device_memory.h (Storage, Tensor's host copies, the cli's
// device check) and what the CUDA tests call. Only built when the build has CUDA (TS_HAVE_CUDA).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/cuda/caching_allocator.h"
#include "vocabulary/memory_category.h"

namespace ts::engine::cuda {

// Devices this process can use; 0 when there is no driver or no device. Never throws.
int device_count();
// Why device_count() is 0 (e.g. "cudaGetDeviceCount: no CUDA-capable device is detected"),
// empty when there are devices.
std::string no_device_reason();
// Whether cuda:`index` can be used; otherwise `why` says why not.
bool device_usable(int index, std::string* why = nullptr);

// Device memory through the caching allocator of `device`, ordered on its context's stream.
// Out of memory: OutOfMemoryError naming the request, the ledger's live bytes by category and
// the allocator's reserved/used bytes.
void* device_allocate(int64_t bytes, int device, vocabulary::Category category, std::string_view owner);
void device_free(void* p, int device) noexcept;
CachingAllocator& device_allocator(int device);

// Host <-> device copies on the device's stream. copy_to_host waits for the data (and for
// everything queued before it); copy_to_device returns once `src` may be reused.
void copy_to_device(void* dst, const void* src, size_t bytes, int device);
void copy_to_host(void* dst, const void* src, size_t bytes, int device);
// Zeroes device memory, queued on the stream.
void zero_fill(void* p, size_t bytes, int device);
// What the driver says of the device's memory (cudaMemGetInfo): the cross-check of the
// allocator's books. ok = false when the call failed (then both are 0).
struct DeviceMemoryInfo {
  bool ok = false;
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
DeviceMemoryInfo device_memory_info(int device);

// Waits for all work queued on the device's stream.
void synchronize(int device);

// TF32 tensor-core math for fp32 convolutions and GEMMs (cuDNN and cuBLAS). On by default,
// like PyTorch's cuDNN default; TS_CUDA_TF32=0 in the environment turns it off at start.
// A run records it (what the numbers were computed with).
bool tf32_allowed();
void set_tf32_allowed(bool on);

class Tf32Scope {
 public:
  explicit Tf32Scope(bool on) : saved_(tf32_allowed()) { set_tf32_allowed(on); }
  ~Tf32Scope() { set_tf32_allowed(saved_); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool saved_;
};

}  // namespace ts::engine::cuda
