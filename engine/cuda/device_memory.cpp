#include "engine/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/cuda/check.h"
#include "engine/cuda/device_context.h"
#include "engine/cuda/immortal.h"

namespace ts::engine::cuda {

namespace {

struct Devices {
  int count = 0;
  std::string reason;
};

const Devices& devices() {
  static const Devices d = [] {
    Devices r;
    int n = 0;
    const cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
      r.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(rc) + ": " + cudaGetErrorString(rc);
      (void)cudaGetLastError();  // not sticky: clear it so later calls do not report it
      return r;
    }
    r.count = n;
    if (n == 0) r.reason = "cudaGetDeviceCount: 0 devices";
    return r;
  }();
  return d;
}

struct Allocators {
  std::mutex mutex;
  std::vector<std::unique_ptr<CachingAllocator>> per_device;
};

Allocators& allocators() {
  static Immortal<Allocators> a;
  return a.get();
}

std::unique_ptr<CachingAllocator> make_allocator(int device) {
  auto raw_alloc = [device](size_t bytes) -> void* {
    DeviceGuard guard(device);
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    TS_CUDA_CHECK(rc);
    return p;
  };
  auto raw_free = [device](void* p) {
    DeviceGuard guard(device);
    TS_CUDA_CHECK(cudaFree(p));
  };
  auto info = [device]() -> std::string {
    DeviceGuard guard(device);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      (void)cudaGetLastError();
      return "device memory info unavailable";
    }
    return "device reports " + format_bytes(static_cast<int64_t>(free_b)) + " free of " +
           format_bytes(static_cast<int64_t>(total_b));
  };
  return std::make_unique<CachingAllocator>("cuda:" + std::to_string(device), raw_alloc, raw_free, info);
}

bool tf32_from_env() {
  const char* v = std::getenv("TS_CUDA_TF32");
  return !(v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "false") == 0));
}

std::atomic<bool>& tf32_flag() {
  static std::atomic<bool> flag{tf32_from_env()};
  return flag;
}

}  // namespace

DeviceMemoryInfo device_memory_info(int device) {
  DeviceGuard guard(device);
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  return {true, static_cast<int64_t>(free_b), static_cast<int64_t>(total_b)};
}

int device_count() { return devices().count; }

std::string no_device_reason() { return devices().reason; }

bool device_usable(int index, std::string* why) {
  const Devices& d = devices();
  if (index >= 0 && index < d.count) return true;
  if (why) {
    if (d.count == 0) {
      *why = "no usable CUDA device for cuda:" + std::to_string(index) + " (" + d.reason + ")";
    } else {
      *why = "no CUDA device cuda:" + std::to_string(index) + " (this machine has " + std::to_string(d.count) +
             ", cuda:0 to cuda:" + std::to_string(d.count - 1) + ")";
    }
  }
  return false;
}

CachingAllocator& device_allocator(int device) {
  std::string why;
  if (!device_usable(device, &why)) throw std::runtime_error(why);
  auto& a = allocators();
  std::lock_guard<std::mutex> lock(a.mutex);
  if (a.per_device.size() <= static_cast<size_t>(device)) a.per_device.resize(static_cast<size_t>(device) + 1);
  auto& slot = a.per_device[static_cast<size_t>(device)];
  if (!slot) slot = make_allocator(device);
  return *slot;
}

void* device_allocate(int64_t bytes, int device, vocabulary::Category category, std::string_view owner) {
  if (bytes < 0) throw std::invalid_argument("negative allocation size");
  DeviceContext& ctx = DeviceContext::get(device);
  return device_allocator(device).allocate(static_cast<size_t>(bytes), reinterpret_cast<uintptr_t>(ctx.stream()),
                                           category, owner);
}

void device_free(void* p, int device) noexcept {
  if (!p) return;
  try {
    device_allocator(device).free(p);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trainscope: freeing device memory on cuda:%d failed: %s\n", device, e.what());
  }
}

void copy_to_device(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  DeviceContext& ctx = DeviceContext::get(device);
  DeviceGuard guard(device);
  // From pageable memory the runtime has staged `src` when this returns (CUDA's documented
  // behaviour for pageable host-to-device copies), so the caller may reuse it at once.
  TS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx.stream()));
}

void copy_to_host(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  DeviceContext& ctx = DeviceContext::get(device);
  DeviceGuard guard(device);
  TS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream()));
  TS_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
}

void zero_fill(void* p, size_t bytes, int device) {
  if (bytes == 0) return;
  DeviceContext& ctx = DeviceContext::get(device);
  DeviceGuard guard(device);
  TS_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx.stream()));
}

void synchronize(int device) {
  DeviceContext& ctx = DeviceContext::get(device);
  DeviceGuard guard(device);
  TS_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
}

bool tf32_allowed() { return tf32_flag().load(std::memory_order_relaxed); }

void set_tf32_allowed(bool on) { tf32_flag().store(on, std::memory_order_relaxed); }

}  // namespace ts::engine::cuda
