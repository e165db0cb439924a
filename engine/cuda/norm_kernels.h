#pragma once
// Internal to engine/cuda/: launchers of norm.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers, sizes
// element counts.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

// Batch normalisation:
// inv_std[c] = 1 / sqrt(var[c] + eps)
cudaError_t inv_std(const float* var, float eps, float* inv, int64_t c, cudaStream_t s);

// var[c] = 1 / inv_std[c]^2 - eps  (the biased variance cuDNN normalised with)
cudaError_t var_from_inv_std(const float* inv, float eps, float* var, int64_t c, cudaStream_t s);

// y = (x - mean) * inv_std * gamma + beta, per channel of [n, c, hw].
cudaError_t bn_eval_forward(const float* x, const float* gamma, const float* beta, const float* mean, const float* inv,
                            float* y, int64_t n, int64_t c, int64_t hw, cudaStream_t s);

// dx = dy * gamma * inv_std.
cudaError_t bn_eval_backward_data(const float* dy, const float* gamma, const float* inv, float* dx, int64_t n,
                                  int64_t c, int64_t hw, cudaStream_t s);

// Layer normalisation. x [m, d]: y, mean [m], rstd [m].
cudaError_t layer_norm_forward(const float* x, const float* gamma, const float* beta, int64_t m, int64_t d, float eps,
                               float* y, float* mean, float* rstd, cudaStream_t s);

// dx [m, d]; dgamma, dbeta [d] (column sums over the rows).
cudaError_t layer_norm_backward(const float* dy, const float* x, const float* gamma, const float* mean,
                                const float* rstd, int64_t m, int64_t d, float* dx, float* dgamma, float* dbeta,
                                cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
