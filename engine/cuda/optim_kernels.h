#pragma once
// Internal to engine/cuda/: launchers of optim.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers, sizes element
// counts.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

// momentum_buf may be null (plain SGD step).
cudaError_t sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, float lr, float momentum,
                     float weight_decay, bool nesterov, cudaStream_t s);

// Adam with step_size = lr / (1 - beta1^t) and bc2_sqrt = sqrt(1 - beta2^t) computed by the caller.
cudaError_t adam_step(float* param, const float* grad, float* m, float* v, int64_t n, float beta1, float beta2,
                      float eps, float weight_decay, float step_size, float bc2_sqrt, cudaStream_t s);

// In place over n elements: square_avg = alpha square_avg + (1 - alpha) g^2; param -= lr g / d
// with d = sqrt(square_avg + eps) (eps_inside_sqrt) or sqrt(square_avg) + eps.
cudaError_t rmsprop_step(float* param, const float* grad, float* square_avg, int64_t n, float lr, float alpha,
                         float eps, bool eps_inside_sqrt, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
