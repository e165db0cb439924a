// The pointwise family on the GPU (kernels in pointwise.cu). Checks follow the CPU backend's
// (cpu/pointwise.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/pointwise_kernels.h"

namespace ts::engine::cuda {

Tensor CudaBackend::relu_forward(const Tensor& x) {
  check_on(x, device_, "relu", "x");
  Env env(*impl_);
  Tensor y = Tensor::empty(x.shape(), x.device(), x.layout());
  TS_CUDA_CHECK(kernels::relu_forward(x.data(), y.data(), x.storage_numel(), env.stream));
  return y;
}

Tensor CudaBackend::relu_backward(const Tensor& dy_in, const Tensor& y) {
  check_same(dy_in, y, device_, "relu_backward");
  const Tensor dy = in_layout(*this, dy_in, y.layout());
  Env env(*impl_);
  Tensor dx = Tensor::empty(y.shape(), y.device(), y.layout());
  TS_CUDA_CHECK(kernels::relu_backward(dy.data(), y.data(), dx.data(), y.storage_numel(), env.stream));
  return dx;
}

Tensor CudaBackend::add(const Tensor& a, const Tensor& b_in) {
  check_same(a, b_in, device_, "add");
  const Tensor b = in_layout(*this, b_in, a.layout());
  Env env(*impl_);
  Tensor y = Tensor::empty(a.shape(), a.device(), a.layout());
  TS_CUDA_CHECK(kernels::add(a.data(), b.data(), y.data(), a.storage_numel(), env.stream));
  return y;
}

Tensor CudaBackend::mul(const Tensor& a, const Tensor& b_in) {
  check_same(a, b_in, device_, "mul");
  const Tensor b = in_layout(*this, b_in, a.layout());
  Env env(*impl_);
  Tensor y = Tensor::empty(a.shape(), a.device(), a.layout());
  TS_CUDA_CHECK(kernels::mul(a.data(), b.data(), y.data(), a.storage_numel(), env.stream));
  return y;
}

Tensor CudaBackend::scale(const Tensor& x, float s) {
  check_on(x, device_, "scale", "x");
  Env env(*impl_);
  Tensor y = Tensor::empty(x.shape(), x.device(), x.layout());
  TS_CUDA_CHECK(kernels::scale(x.data(), s, y.data(), x.storage_numel(), env.stream));
  return y;
}

void CudaBackend::add_inplace(const Tensor& acc, const Tensor& x_in, float alpha) {
  check_same(acc, x_in, device_, "add_inplace");
  const Tensor x = in_layout(*this, x_in, acc.layout());
  Env env(*impl_);
  TS_CUDA_CHECK(kernels::add_inplace(acc.data(), x.data(), alpha, acc.storage_numel(), env.stream));
}

Tensor CudaBackend::tanh_forward(const Tensor& x) {
  check_on(x, device_, "tanh", "x");
  Env env(*impl_);
  Tensor y = Tensor::empty(x.shape(), x.device(), x.layout());
  // tanh(0) = 0 keeps padded channels zero.
  TS_CUDA_CHECK(kernels::tanh_forward(x.data(), y.data(), x.storage_numel(), env.stream));
  return y;
}

Tensor CudaBackend::tanh_backward(const Tensor& dy_in, const Tensor& y) {
  check_on(dy_in, device_, "tanh_backward", "dy");
  check_on(y, device_, "tanh_backward", "y");
  if (dy_in.shape() != y.shape()) {
    fail("tanh_backward", "shapes differ: " + shape_str(dy_in.shape()) + " vs " + shape_str(y.shape()));
  }
  const Tensor dy = dy_in.layout() == y.layout() ? dy_in : to_layout(dy_in, y.layout());
  Env env(*impl_);
  Tensor dx = Tensor::empty(y.shape(), y.device(), y.layout());
  TS_CUDA_CHECK(kernels::tanh_backward(dy.data(), y.data(), dx.data(), y.storage_numel(), env.stream));
  return dx;
}

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

Tensor CudaBackend::exp_forward(const Tensor& x) {
  if (!usable_plain(x, device_, -1)) fail("exp", "needs a plain tensor on cuda:" + std::to_string(device_));
  Env env(*impl_);
  Tensor y = Tensor::empty(x.shape(), x.device());
  TS_CUDA_CHECK(kernels::exp_forward(x.data(), y.data(), x.numel(), env.stream));
  return y;
}

Tensor CudaBackend::gelu_forward(const Tensor& x) {
  check_plain(x, device_, "gelu", "x", 0);
  Env env(*impl_);
  Tensor y = Tensor::empty(x.shape(), x.device());
  TS_CUDA_CHECK(kernels::gelu_forward(x.data(), y.data(), x.numel(), env.stream));
  return y;
}

Tensor CudaBackend::gelu_backward(const Tensor& dy, const Tensor& x) {
  check_plain(x, device_, "gelu_backward", "x", 0);
  check_plain(dy, device_, "gelu_backward", "dy", 0);
  if (dy.shape() != x.shape()) throw std::invalid_argument("gelu_backward: dy and x shapes differ");
  Env env(*impl_);
  Tensor dx = Tensor::empty(x.shape(), x.device());
  const auto inv_sqrt_2pi = static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);
  TS_CUDA_CHECK(kernels::gelu_backward(dy.data(), x.data(), inv_sqrt_2pi, dx.data(), x.numel(), env.stream));
  return dx;
}

Tensor CudaBackend::dropout_mask(const Shape& shape, float p, uint64_t seed) {
  if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p));
  Env env(*impl_);
  Tensor m = Tensor::empty(shape, cuda_device(device_));
  TS_CUDA_CHECK(kernels::dropout_mask(m.data(), m.numel(), p, 1.0f / (1.0f - p), seed, env.stream));
  return m;
}

}  // namespace ts::engine::cuda
