// backend_for(Device), memory_for(Device), a device's timeline (synchronize, event pairs, side
// streams) and its convolution plans' stats: the one place that knows every backend of this build (the backends
// themselves never include one another). cpu always; cuda when the build has CUDA.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/autotune.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/host_allocator.h"
#include "engine/device_memory.h"
#include "engine/device_timeline.h"
#include "engine/side_stream.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/event_pair.h"
#include "engine/cuda/side_stream.h"
#endif

namespace ts::engine {

int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  if (stride < 1 || dilation < 1 || kernel < 1 || pad < 0) {
    throw std::invalid_argument("conv_out_size: bad kernel " + std::to_string(kernel) + ", stride " +
                                std::to_string(stride) + ", pad " + std::to_string(pad) + ", dilation " +
                                std::to_string(dilation));
  }
  const int64_t span = dilation * (kernel - 1) + 1;
  if (in + 2 * pad < span) {
    throw std::invalid_argument("window of " + std::to_string(span) + " does not fit input " + std::to_string(in) +
                                " with padding " + std::to_string(pad));
  }
  return (in + 2 * pad - span) / stride + 1;
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu::cpu_backend();
#ifdef TS_HAVE_CUDA
  // Throws std::runtime_error naming the reason when the device is not usable (no driver,
  // no GPU, index out of range).
  if (device.type == DeviceType::cuda) return cuda::cuda_backend(device.index);
#endif
  throw std::runtime_error("no backend for device " + device.str() + " in this build");
}

namespace {

#ifdef TS_HAVE_CUDA
class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  // The caching allocator throws (naming the request and the ledger's breakdown) when the device
  // is out of memory even after emptying its cache.
  void* allocate(int64_t bytes, vocabulary::Category category, std::string_view owner) override {
    return cuda::device_allocate(bytes, device_, category, owner);
  }
  void release(void* p) noexcept override { cuda::device_free(p, device_); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    cuda::copy_to_device(dst, src, bytes, device_);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { cuda::copy_to_host(dst, src, bytes, device_); }
  void zero(void* p, size_t bytes) override { cuda::zero_fill(p, bytes, device_); }

 private:
  int device_;
};
#endif

}  // namespace

DeviceMemory& memory_for(Device device) {
#ifdef TS_HAVE_CUDA
  if (device.type == DeviceType::cuda) {
    // One per possible device, made once: every tensor allocation and free passes here, so no
    // lock and no lookup. Never destroyed: tensors in static storage may be freed after the
    // registry's statics.
    constexpr int kMaxDevices = 64;
    static std::vector<CudaMemory>* const memories = [] {
      auto* all = new std::vector<CudaMemory>();
      all->reserve(kMaxDevices);
      for (int i = 0; i < kMaxDevices; ++i) all->emplace_back(i);
      return all;
    }();
    if (device.index < 0 || device.index >= kMaxDevices) {
      throw std::runtime_error("no device memory for " + device.str() + " (device index out of range)");
    }
    return (*memories)[static_cast<size_t>(device.index)];
  }
#endif
  if (device.type == DeviceType::cuda)
    throw std::runtime_error("this build has no CUDA backend for device " + device.str());
  throw std::runtime_error("no device memory for " + device.str() + " (host memory is the CPU backend's)");
}

bool device_usable(Device device, std::string* why) {
  if (device.is_cpu()) return true;
  if (device.type == DeviceType::cuda) {
#ifdef TS_HAVE_CUDA
    return cuda::device_usable(device.index, why);
#else
    if (why) {
      *why = "this build has no CUDA (configure with -DTS_CUDA=ON where nvcc, cuDNN, CUPTI and NCCL are installed; "
             "see docs/gpu-machine.md)";
    }
    return false;
#endif
  }
  if (why) *why = device.str() + " holds shapes only and runs no work";
  return false;
}

void synchronize(Device device) {
#ifdef TS_HAVE_CUDA
  if (device.type == DeviceType::cuda) {
    cuda::synchronize(device.index);
    return;
  }
#endif
  if (device.type == DeviceType::cuda)
    throw std::runtime_error("this build has no CUDA backend for device " + device.str());
}

std::unique_ptr<DeviceEventPair> make_event_pair(Device device) {
#ifdef TS_HAVE_CUDA
  if (device.type == DeviceType::cuda) return std::make_unique<cuda::EventPair>(device.index);
#endif
  if (device.type == DeviceType::cuda)
    throw std::runtime_error("this build has no CUDA backend for device " + device.str());
  return nullptr;
}

std::unique_ptr<SideStream> make_side_stream(Device device) {
  if (device.is_cpu()) return make_inline_stream();
#ifdef TS_HAVE_CUDA
  if (device.type == DeviceType::cuda) return std::make_unique<cuda::CudaSideStream>(device.index);
#endif
  throw std::runtime_error("no side stream for device " + device.str() + " in this build");
}

ConvPlanStats conv_plan_stats(Device device) {
#ifdef TS_HAVE_CUDA
  // An unusable device has made no plans; asking for its backend would throw.
  if (device.type == DeviceType::cuda && cuda::device_usable(device.index)) {
    return cuda::cuda_backend(device.index).conv_plan_stats();
  }
#endif
  (void)device;
  return {};
}

HostCacheStats host_cache_stats() {
  const cpu::HostAllocatorStats s = cpu::host_allocator_stats();
  return {s.hits, s.misses, s.evicted_bytes};
}

DeviceMemoryStats device_memory_stats(Device device) {
  DeviceMemoryStats out;
#ifdef TS_HAVE_CUDA
  if (device.type != DeviceType::cuda) return out;
  const auto s = cuda::device_allocator(device.index).stats();
  out.available = true;
  out.reserved_peak_bytes = s.peak_reserved_bytes;
  out.used_peak_bytes = s.peak_used_bytes;
  out.reserved_bytes = s.reserved_bytes;
  const auto info = cuda::device_memory_info(device.index);
  out.driver_ok = info.ok;
  out.driver_free_bytes = info.free_bytes;
  out.driver_total_bytes = info.total_bytes;
  out.tf32_allowed = cuda::tf32_allowed();
#else
  (void)device;
#endif
  return out;
}

}  // namespace ts::engine
