// The norm family's kernels: batch normalisation's evaluation mode and the conversions between
// variance and inverse standard deviation; layer normalisation, one block per row, in the CPU
// backend's order of operations and precision (double sums).
#include <cfloat>
#include <cmath>

#include "engine/cuda/block_reduce.cuh"
#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/norm_kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

__global__ void inv_std_kernel(const float* var, float eps, float* inv, int64_t c) {
  for (int64_t i = global_index(); i < c; i += grid_stride()) inv[i] = 1.0f / sqrtf(var[i] + eps);
}

__global__ void var_from_inv_std_kernel(const float* inv, float eps, float* var, int64_t c) {
  for (int64_t i = global_index(); i < c; i += grid_stride()) {
    const double iv = inv[i];
    const double v = 1.0 / (iv * iv) - static_cast<double>(eps);
    var[i] = v > 0.0 ? static_cast<float>(v) : 0.0f;
  }
}

__global__ void bn_eval_forward_kernel(const float* x, const float* gamma, const float* beta, const float* mean,
                                       const float* inv, float* y, int64_t total, int64_t c, int64_t hw) {
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t ch = (i / hw) % c;
    y[i] = (x[i] - mean[ch]) * inv[ch] * gamma[ch] + beta[ch];
  }
}

__global__ void bn_eval_backward_data_kernel(const float* dy, const float* gamma, const float* inv, float* dx,
                                             int64_t total, int64_t c, int64_t hw) {
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t ch = (i / hw) % c;
    dx[i] = dy[i] * gamma[ch] * inv[ch];
  }
}

__global__ void layer_norm_forward_kernel(const float* x, const float* gamma, const float* beta, int64_t d, float eps,
                                          float* y, float* mean_out, float* rstd_out) {
  __shared__ double shared[kThreads];
  const int64_t i = blockIdx.x;
  const float* row = x + i * d;
  double s = 0;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) s += row[k];
  s = block_sum(s, shared);
  const double mean = s / static_cast<double>(d);
  double v = 0;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) v += (row[k] - mean) * (row[k] - mean);
  v = block_sum(v, shared);
  const auto rstd = static_cast<float>(1.0 / sqrt(v / static_cast<double>(d) + eps));
  const auto mf = static_cast<float>(mean);
  if (threadIdx.x == 0) {
    mean_out[i] = mf;
    rstd_out[i] = rstd;
  }
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) y[i * d + k] = (row[k] - mf) * rstd * gamma[k] + beta[k];
}

__global__ void layer_norm_backward_data_kernel(const float* dy, const float* x, const float* gamma, const float* mean,
                                                const float* rstd, int64_t d, float* dx) {
  __shared__ double shared[kThreads];
  const int64_t i = blockIdx.x;
  const float* row = x + i * d;
  const float* gy = dy + i * d;
  const float m = mean[i], r = rstd[i];
  double sum_dxh = 0, sum_dxh_xh = 0;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
    const double xh = (row[k] - m) * r;
    const double dxh = static_cast<double>(gy[k]) * gamma[k];
    sum_dxh += dxh;
    sum_dxh_xh += dxh * xh;
  }
  sum_dxh = block_sum(sum_dxh, shared);
  sum_dxh_xh = block_sum(sum_dxh_xh, shared);
  const double a = sum_dxh / static_cast<double>(d), c = sum_dxh_xh / static_cast<double>(d);
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
    const double xh = (row[k] - m) * r;
    dx[i * d + k] = static_cast<float>(r * (static_cast<double>(gy[k]) * gamma[k] - a - xh * c));
  }
}

// One thread per column: dgamma = sum_i dy xhat, dbeta = sum_i dy, in row order.
__global__ void layer_norm_backward_params_kernel(const float* dy, const float* x, const float* mean, const float* rstd,
                                                  int64_t m, int64_t d, float* dgamma, float* dbeta) {
  for (int64_t k = global_index(); k < d; k += grid_stride()) {
    double lg = 0, lb = 0;
    for (int64_t i = 0; i < m; ++i) {
      const double xh = (x[i * d + k] - mean[i]) * rstd[i];
      lg += dy[i * d + k] * xh;
      lb += dy[i * d + k];
    }
    dgamma[k] = static_cast<float>(lg);
    dbeta[k] = static_cast<float>(lb);
  }
}

}  // namespace

cudaError_t inv_std(const float* var, float eps, float* inv, int64_t c, cudaStream_t s) {
  if (c <= 0) return cudaSuccess;
  inv_std_kernel<<<blocks_for(c), kThreads, 0, s>>>(var, eps, inv, c);
  return cudaGetLastError();
}

cudaError_t var_from_inv_std(const float* inv, float eps, float* var, int64_t c, cudaStream_t s) {
  if (c <= 0) return cudaSuccess;
  var_from_inv_std_kernel<<<blocks_for(c), kThreads, 0, s>>>(inv, eps, var, c);
  return cudaGetLastError();
}

cudaError_t bn_eval_forward(const float* x, const float* gamma, const float* beta, const float* mean, const float* inv,
                            float* y, int64_t n, int64_t c, int64_t hw, cudaStream_t s) {
  const int64_t total = n * c * hw;
  if (total <= 0) return cudaSuccess;
  bn_eval_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, gamma, beta, mean, inv, y, total, c, hw);
  return cudaGetLastError();
}

cudaError_t bn_eval_backward_data(const float* dy, const float* gamma, const float* inv, float* dx, int64_t n,
                                  int64_t c, int64_t hw, cudaStream_t s) {
  const int64_t total = n * c * hw;
  if (total <= 0) return cudaSuccess;
  bn_eval_backward_data_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, gamma, inv, dx, total, c, hw);
  return cudaGetLastError();
}

cudaError_t layer_norm_forward(const float* x, const float* gamma, const float* beta, int64_t m, int64_t d, float eps,
                               float* y, float* mean, float* rstd, cudaStream_t s) {
  if (m <= 0) return cudaSuccess;
  layer_norm_forward_kernel<<<static_cast<unsigned>(m), kThreads, 0, s>>>(x, gamma, beta, d, eps, y, mean, rstd);
  return cudaGetLastError();
}

cudaError_t layer_norm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                                const float* rstd, int64_t m, int64_t d, float* dx, float* dgamma, float* dbeta,
                                cudaStream_t s) {
  if (m > 0) {
    layer_norm_backward_data_kernel<<<static_cast<unsigned>(m), kThreads, 0, s>>>(dy, x, gamma, mean, rstd, d, dx);
    const cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
  }
  if (d <= 0) return cudaSuccess;
  layer_norm_backward_params_kernel<<<blocks_for(d), kThreads, 0, s>>>(dy, x, mean, rstd, m, d, dgamma, dbeta);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
