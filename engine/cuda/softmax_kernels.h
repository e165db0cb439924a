#pragma once
// Internal to engine/cuda/: launchers of softmax.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers, sizes
// element counts. The arithmetic is the CPU backend's, in its order (cpu/softmax.cpp).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ts::engine::cuda::kernels {

// Rows of x [m, k], one warp per row: y = x - lse, lse = max + log(sum_j exp(x_j - max)) with
// the sum, exp and log in double, rounded to float once.
cudaError_t log_softmax_forward(const float* x, int64_t m, int64_t k, float* y, cudaStream_t s);
// dx = dy - exp(y) sum_j dy_j per row (the row sum in double).
cudaError_t log_softmax_backward(const float* dy, const float* y, int64_t m, int64_t k, float* dx, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
