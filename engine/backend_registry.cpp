// backend_for(Device): the one place that knows every backend of this build (the backends
// themselves never include one another). cpu always; cuda when the build has CUDA.
#include <stdexcept>
#include <string>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
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

}  // namespace ts::engine
