// The optimizer family's kernels: SGD with momentum, Adam, RMSProp; element-wise, in the CPU
// backend's order of operations (cpu/optim.cpp).
#include <cmath>

#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/optim_kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

__global__ void sgd_plain_kernel(float* w, const float* g, int64_t n, float lr, float wd) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) w[i] -= lr * (g[i] + wd * w[i]);
}

__global__ void sgd_momentum_kernel(float* w, const float* g, float* b, int64_t n, float lr, float momentum, float wd,
                                    bool nesterov) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float gi = g[i] + wd * w[i];
    const float bi = momentum * b[i] + gi;
    b[i] = bi;
    w[i] -= lr * (nesterov ? gi + momentum * bi : bi);
  }
}

__global__ void adam_kernel(float* w, const float* g, float* pm, float* pv, int64_t n, float beta1, float beta2,
                            float eps, float wd, float step_size, float bc2_sqrt) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float gi = g[i] + wd * w[i];
    const float mi = beta1 * pm[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * pv[i] + (1.0f - beta2) * gi * gi;
    pm[i] = mi;
    pv[i] = vi;
    w[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
  }
}

__global__ void rmsprop_kernel(float* p, const float* g, float* s, int64_t n, float lr, float alpha,
                               float one_minus_alpha, float eps, bool inside) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float gi = g[i];
    const float si = alpha * s[i] + one_minus_alpha * gi * gi;
    s[i] = si;
    const float d = inside ? sqrtf(si + eps) : sqrtf(si) + eps;
    p[i] -= lr * gi / d;
  }
}

}  // namespace

cudaError_t sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, float lr, float momentum,
                     float weight_decay, bool nesterov, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  if (momentum_buf) {
    sgd_momentum_kernel<<<blocks_for(n), kThreads, 0, s>>>(param, grad, momentum_buf, n, lr, momentum, weight_decay,
                                                           nesterov);
  } else {
    sgd_plain_kernel<<<blocks_for(n), kThreads, 0, s>>>(param, grad, n, lr, weight_decay);
  }
  return cudaGetLastError();
}

cudaError_t adam_step(float* param, const float* grad, float* m, float* v, int64_t n, float beta1, float beta2,
                      float eps, float weight_decay, float step_size, float bc2_sqrt, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  adam_kernel<<<blocks_for(n), kThreads, 0, s>>>(param, grad, m, v, n, beta1, beta2, eps, weight_decay, step_size,
                                                 bc2_sqrt);
  return cudaGetLastError();
}

cudaError_t rmsprop_step(float* param, const float* grad, float* square_avg, int64_t n, float lr, float alpha,
                         float eps, bool eps_inside_sqrt, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  const float one_minus_alpha = 1.0f - alpha;  // in float, as the CPU backend
  rmsprop_kernel<<<blocks_for(n), kThreads, 0, s>>>(param, grad, square_avg, n, lr, alpha, one_minus_alpha, eps,
                                                    eps_inside_sqrt);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
