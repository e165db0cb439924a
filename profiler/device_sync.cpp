#include "profiler/device_sync.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace ts::profiler {

namespace {

// Driver entry points through the runtime, so that the profiler library does not link libcuda
// (which machines without a GPU lack). The ABI of CUDA 12.0, which both functions have had since 7.0.
template <typename Fn>
Fn driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

void synchronize_devices_in_use() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return;  // nothing can have run
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) return;
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);
  const auto device_get = driver_function<DeviceGet>("cuDeviceGet");
  const auto get_state = driver_function<PrimaryCtxGetState>("cuDevicePrimaryCtxGetState");
  for (int d = 0; d < count; ++d) {
    bool in_use = d == current;  // without the driver's answer, the one device we know is used
    CUdevice dev{};
    unsigned int flags = 0;
    int active = 0;
    if (device_get != nullptr && get_state != nullptr && device_get(&dev, d) == CUDA_SUCCESS &&
        get_state(dev, &flags, &active) == CUDA_SUCCESS) {
      in_use = active != 0;
    }
    if (!in_use || cudaSetDevice(d) != cudaSuccess) continue;
    (void)cudaDeviceSynchronize();
  }
  (void)cudaSetDevice(current);
}

}  // namespace ts::profiler
