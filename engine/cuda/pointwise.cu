// The pointwise family's kernels: grid-stride loops over the storage, in the CPU backend's order
// of operations (dropout's draw from numerics/dropout.h).
#include <cfloat>
#include <cmath>

#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/pointwise_kernels.h"
#include "engine/numerics/dropout.h"

namespace ts::engine::cuda::kernels {

namespace {

__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_kernel(const float* dy, const float* y, float* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = a[i] + b[i];
}

__global__ void mul_kernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = a[i] * b[i];
}

__global__ void scale_kernel(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = x[i] * s;
}

// acc and x may be the same array (running statistics decay in place).
__global__ void add_inplace_kernel(float* acc, const float* x, float alpha, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) acc[i] += alpha * x[i];
}

__global__ void tanh_forward_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = tanhf(x[i]);
}

__global__ void tanh_backward_kernel(const float* dy, const float* y, float* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

__global__ void clipped_relu_forward_kernel(const float* x, float c, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float v = x[i];
    y[i] = v > 0.0f ? (v < c ? v : c) : 0.0f;
  }
}

__global__ void clipped_relu_backward_kernel(const float* dy, const float* y, float c, float* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float v = y[i];
    dx[i] = v > 0.0f && v < c ? dy[i] : 0.0f;
  }
}

__global__ void exp_forward_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = expf(x[i]);
}

__global__ void scale_by_device_scalar_kernel(const float* src, const float* scalar, float* dst, int64_t n) {
  const float g = scalar[0];
  for (int64_t i = global_index(); i < n; i += grid_stride()) dst[i] = g * src[i];
}

__global__ void gelu_forward_kernel(const float* x, float* y, int64_t n) {
  const float r = static_cast<float>(M_SQRT1_2);
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * r));
}

__global__ void gelu_backward_kernel(const float* dy, const float* x, float inv_sqrt_2pi, float* dx, int64_t n) {
  const float r = static_cast<float>(M_SQRT1_2);
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float cdf = 0.5f * (1.0f + erff(x[i] * r));
    const float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

__global__ void dropout_mask_kernel(float* mask, int64_t n, float p, float keep, uint64_t base) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    mask[i] = numerics::dropout_value(base, i, p, keep);
  }
}

__global__ void add_channel_bias_kernel(float* y, const float* bias, int64_t total, int64_t c, int64_t hw) {
  for (int64_t i = global_index(); i < total; i += grid_stride()) y[i] += bias[(i / hw) % c];
}

}  // namespace

cudaError_t relu_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t relu_backward(const float* dy, const float* y, float* dx, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, y, dx, n);
  return cudaGetLastError();
}

cudaError_t add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t mul(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  mul_kernel<<<blocks_for(n), kThreads, 0, s>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t scale(const float* x, float alpha, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, alpha, y, n);
  return cudaGetLastError();
}

cudaError_t add_inplace(float* acc, const float* x, float alpha, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  add_inplace_kernel<<<blocks_for(n), kThreads, 0, s>>>(acc, x, alpha, n);
  return cudaGetLastError();
}

cudaError_t tanh_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  tanh_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t tanh_backward(const float* dy, const float* y, float* dx, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  tanh_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, y, dx, n);
  return cudaGetLastError();
}

cudaError_t clipped_relu_forward(const float* x, float ceiling, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  clipped_relu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, ceiling, y, n);
  return cudaGetLastError();
}

cudaError_t clipped_relu_backward(const float* dy, const float* y, float ceiling, float* dx, int64_t n,
                                  cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  clipped_relu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, y, ceiling, dx, n);
  return cudaGetLastError();
}

cudaError_t exp_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  exp_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t scale_by_device_scalar(const float* src, const float* scalar, float* dst, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  scale_by_device_scalar_kernel<<<blocks_for(n), kThreads, 0, s>>>(src, scalar, dst, n);
  return cudaGetLastError();
}

cudaError_t gelu_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  gelu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t gelu_backward(const float* dy, const float* x, float inv_sqrt_2pi, float* dx, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, x, inv_sqrt_2pi, dx, n);
  return cudaGetLastError();
}

cudaError_t dropout_mask(float* mask, int64_t n, float p, float keep, uint64_t seed, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  dropout_mask_kernel<<<blocks_for(n), kThreads, 0, s>>>(mask, n, p, keep, numerics::splitmix64(seed));
  return cudaGetLastError();
}

cudaError_t add_channel_bias(float* y, const float* bias, int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  const int64_t total = n * c * hw;
  if (total <= 0) return cudaSuccess;
  add_channel_bias_kernel<<<blocks_for(total), kThreads, 0, s>>>(y, bias, total, c, hw);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
