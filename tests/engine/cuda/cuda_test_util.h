#pragma once
// Shared by the GPU-only tests (cuda/<family>_test.cpp, device_test.cpp): the skip when no
// device is usable, the parity tolerances, inputs and their copies on the GPU, and the
// comparison of a GPU result with the CPU backend's. Host <-> device transfers are
// ../on_every_device.h's.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "../on_every_device.h"
#include "engine/backend.h"
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

// Tolerances of the parity tests, max |gpu - cpu| / (1 + |cpu|), with TF32 off (CudaTest):
//   kExact          1e-6  copies, layouts, fill, relu, add/mul/scale, pooling, concat/slice, SGD,
//                         the dropout mask (the same hash, bit for bit), the CTC backward's
//                         scaling: the same float operations in the same order (at most an FMA's
//                         rounding)
//   kPointwise      1e-6  exp and log-softmax forward: CUDA's expf is within 2 ulp, glibc's
//                         within 1; log-softmax's normaliser is a double sum (other order) rounded
//                         once; also the storage sums (double) of clipped outputs, which check
//                         padded channels
//   kReduce         1e-5  sums in another order or precision: sum_all, softmax cross-entropy, bias
//                         gradients, the eval-mode batch-norm gradient, layer norm, label-smoothed
//                         cross-entropy, the sum of squares, the attention softmax (double sums in
//                         another order, expf/erff against libm); log-softmax backward: exp(y) (a
//                         few ulp apart) times the row sum of dy, which reaches ~20 for rows of 1000
//   kTranscendental 1e-5  tanhf, sqrtf and expf on the GPU against the host's libm (an ulp or two)
//   kAtomic         1e-5  backward passes that scatter with atomic adds (RoIAlign, RoIPool): the
//                         summation order differs from the CPU's and from run to run
//   kLibrary        1e-4  cuDNN convolution / batch norm and cuBLAS GEMM against oneDNN: other
//                         algorithms and summation orders (batch norm's variance is recovered
//                         from cuDNN's 1 / sqrt(var + eps)); attention's GEMMs
//   kTf32           2e-2  convolution and GEMM with TF32 tensor cores (10-bit mantissa inputs)
// A family's own (attention, CTC, the recurrent layers) are in its file.
constexpr double kExact = 1e-6;
constexpr double kPointwise = 1e-6;
constexpr double kReduce = 1e-5;
constexpr double kTranscendental = 1e-5;
constexpr double kAtomic = 1e-5;
constexpr double kLibrary = 1e-4;
constexpr double kTf32 = 2e-2;

inline Device gpu() { return Device{DeviceType::cuda, 0}; }
inline Backend& cpu_be() { return backend_for(Device::cpu()); }
inline Backend& gpu_be() { return backend_for(gpu()); }

// max |gpu - cpu| / (1 + |cpu|) over the logical values, with shapes checked.
::testing::AssertionResult close_to_cpu(const Tensor& gpu_result, const Tensor& cpu_result, double tol);
// The same shape, layout and bits of every logical value (NaNs included), the GPU's on the GPU.
::testing::AssertionResult same_bits(const Tensor& gpu_result, const Tensor& cpu_result);

// Uniform in [lo, hi) on the CPU, without gradient; and a copy on the GPU (undefined stays so).
Tensor rnd(const Shape& s, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
Tensor up(const Tensor& t);
// A copy on the GPU in layout l (the GPU backend's own reorder).
Tensor in_layout_gpu(const Tensor& cpu_tensor, const Layout& l);

// What `f` throws as std::invalid_argument (its message), or a note that it did not.
std::string invalid_argument_of(const std::function<void()>& f);

// Fixture of the GPU tests: skips without a device, and turns TF32 off so that the GPU's
// fp32 convolutions and GEMMs are compared with the CPU at fp32 tolerances.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override { TS_REQUIRE_CUDA_DEVICE(); }
  cuda::Tf32Scope tf32_off_{false};
};

}  // namespace ts::engine::testing
