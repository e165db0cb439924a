// The softmax family on the GPU: log-softmax over rows (A3C's policy; kernels in softmax.cu).
// Checks follow the CPU backend's (cpu/softmax.cpp): the same arguments are refused, with std::invalid_argument.
#include <stdexcept>
#include <string>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/softmax_kernels.h"

namespace ts::engine::cuda {

Tensor CudaBackend::log_softmax_forward(const Tensor& x) {
  check_plain_2d(x, device_, "log_softmax");
  Env env(*impl_);
  Tensor y = Tensor::empty(x.shape(), x.device());
  TS_CUDA_CHECK(kernels::log_softmax_forward(x.data(), x.size(0), x.size(1), y.data(), env.stream));
  return y;
}

Tensor CudaBackend::log_softmax_backward(const Tensor& dy, const Tensor& y) {
  const char* op = "log_softmax_backward";
  check_plain_2d(dy, device_, op);
  check_plain_2d(y, device_, op);
  if (dy.shape() != y.shape()) fail(op, "dy and y differ in shape");
  Env env(*impl_);
  Tensor dx = Tensor::empty(y.shape(), y.device());
  TS_CUDA_CHECK(kernels::log_softmax_backward(dy.data(), y.data(), y.size(0), y.size(1), dx.data(), env.stream));
  return dx;
}

}  // namespace ts::engine::cuda
