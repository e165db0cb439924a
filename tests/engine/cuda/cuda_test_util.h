#pragma once
// Shared by the CUDA backend tests: the skip when no device is usable, host <-> device copies
// (one of them differentiable, for gradient checks through the GPU), and the comparison of a
// GPU result with the CPU backend's.
#include <gtest/gtest.h>

#include <string>

#include "engine/backend.h"
#include "engine/gradcheck.h"
#include "engine/cuda/device_memory.h"
#include "engine/tensor.h"

// Skips the calling test (or fixture SetUp) with the reason when no CUDA device is usable.
#define TS_REQUIRE_CUDA_DEVICE()                                                                             \
  do {                                                                                                       \
    if (::ts::engine::cuda::device_count() == 0) {                                                           \
      GTEST_SKIP() << "no CUDA device (" << ::ts::engine::cuda::no_device_reason() << "): GPU test skipped"; \
    }                                                                                                        \
  } while (0)

namespace ts::engine::testing {

inline Device gpu() { return Device{DeviceType::cuda, 0}; }
inline Backend& cpu_be() { return backend_for(Device::cpu()); }
inline Backend& gpu_be() { return backend_for(gpu()); }

// A copy on `device` (plain layout), through the host; no autograd history.
Tensor copy_to(const Tensor& x, Device device);
// The same, recorded for autograd: its backward copies the gradient back to x's device.
Tensor transfer(const Tensor& x, Device device);

// f run on the GPU for the gradient checker: its inputs are transferred there and its result
// back, both differentiably, so finite differences on the CPU check the GPU's backward.
GradFn on_gpu(GradFn f);

// max |gpu - cpu| / (1 + |cpu|) over the logical values, with shapes checked.
::testing::AssertionResult close_to_cpu(const Tensor& gpu_result, const Tensor& cpu_result, double tol);

// Fixture of the GPU tests: skips without a device, and turns TF32 off so that the GPU's
// fp32 convolutions and GEMMs are compared with the CPU at fp32 tolerances.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override { TS_REQUIRE_CUDA_DEVICE(); }
  cuda::Tf32Scope tf32_off_{false};
};

}  // namespace ts::engine::testing
