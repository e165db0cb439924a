// The reduction family on the GPU: the sum of every element and the sum of squares, in double,
// deterministic (kernels in reduce.cu).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/reduce_kernels.h"

namespace ts::engine::cuda {

Tensor CudaBackend::sum_all(const Tensor& x) {
  check_on(x, device_, "sum", "x");
  Env env(*impl_);
  // Padded channels are zero, so the storage sum is the logical sum.
  const int64_t n = x.storage_numel();
  Tensor partials = workspace_tensor(kernels::sum_partials(n) * static_cast<int64_t>(sizeof(double)), device_);
  Tensor y = Tensor::empty({1}, x.device());
  TS_CUDA_CHECK(kernels::sum_all(x.data(), n, reinterpret_cast<double*>(partials.data()), 1.0f, y.data(), env.stream));
  return y;
}

Tensor CudaBackend::sum_squares(const Tensor& x) {
  check_on(x, device_, "sum_squares", "x");
  Env env(*impl_);
  // Padded channels of blocked layouts are zero, so the storage sum is the logical one.
  const int64_t n = x.storage_numel();
  Tensor partials = workspace_tensor(kernels::sum_partials(n) * static_cast<int64_t>(sizeof(double)), device_);
  Tensor y = Tensor::empty({1}, x.device());
  TS_CUDA_CHECK(kernels::sum_squares(x.data(), n, reinterpret_cast<double*>(partials.data()), y.data(), env.stream));
  return y;
}

}  // namespace ts::engine::cuda
