// Deep Speech 2's clipped ReLU and A3C's log-softmax, exp and RMSProp on the GPU (kernels in
// kernels_pointwise.cu). Checks follow the CPU backend's (cpu_backend.cpp, cpu_softmax.cpp,
// cpu_rmsprop.cpp): the same arguments are refused, with std::invalid_argument.
#include <stdexcept>
#include <string>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/kernels_pointwise.h"

namespace ts::engine::cuda {

// ---------------------------------------------------------------- clipped ReLU (Deep Speech 2)

Tensor CudaBackend::clipped_relu_forward(const Tensor& x, float ceiling) {
  check_on(x, device_, "clipped_relu", "x");
  Env env(*impl_);
  // Any layout, kept: the kernel runs over the storage, and 0 stays 0 in padded channels.
  Tensor y = Tensor::empty(x.shape(), x.device(), x.layout());
  TS_CUDA_CHECK(kernels::clipped_relu_forward(x.data(), ceiling, y.data(), x.storage_numel(), env.stream));
  return y;
}

Tensor CudaBackend::clipped_relu_backward(const Tensor& dy_in, const Tensor& y, float ceiling) {
  const char* op = "clipped_relu_backward";
  check_on(dy_in, device_, op, "dy");
  check_on(y, device_, op, "y");
  if (dy_in.shape() != y.shape()) {
    fail(op, "shapes differ: " + shape_str(dy_in.shape()) + " vs " + shape_str(y.shape()));
  }
  // The gradient comes back in y's layout, as on the CPU.
  const Tensor dy = dy_in.layout() == y.layout() ? dy_in : to_layout(dy_in, y.layout());
  Env env(*impl_);
  Tensor dx = Tensor::empty(y.shape(), y.device(), y.layout());
  TS_CUDA_CHECK(kernels::clipped_relu_backward(dy.data(), y.data(), ceiling, dx.data(), y.storage_numel(), env.stream));
  return dx;
}

// ---------------------------------------------------------------- log-softmax, exp (A3C's policy)

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

Tensor CudaBackend::exp_forward(const Tensor& x) {
  if (!usable_plain(x, device_, -1)) fail("exp", "needs a plain tensor on cuda:" + std::to_string(device_));
  Env env(*impl_);
  Tensor y = Tensor::empty(x.shape(), x.device());
  TS_CUDA_CHECK(kernels::exp_forward(x.data(), y.data(), x.numel(), env.stream));
  return y;
}

// ---------------------------------------------------------------- RMSProp (A3C's shared optimizer)

}  // namespace ts::engine::cuda
