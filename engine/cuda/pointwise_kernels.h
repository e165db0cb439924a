#pragma once
// Internal to engine/cuda/: launchers of pointwise.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers, sizes
// element counts.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

// --- element-wise over n storage elements ---
cudaError_t relu_forward(const float* x, float* y, int64_t n, cudaStream_t s);

cudaError_t relu_backward(const float* dy, const float* y, float* dx, int64_t n, cudaStream_t s);

cudaError_t add(const float* a, const float* b, float* y, int64_t n, cudaStream_t s);

cudaError_t mul(const float* a, const float* b, float* y, int64_t n, cudaStream_t s);

cudaError_t scale(const float* x, float alpha, float* y, int64_t n, cudaStream_t s);

cudaError_t add_inplace(float* acc, const float* x, float alpha, int64_t n, cudaStream_t s);  // may alias

cudaError_t tanh_forward(const float* x, float* y, int64_t n, cudaStream_t s);

cudaError_t tanh_backward(const float* dy, const float* y, float* dx, int64_t n, cudaStream_t s);

// dst[i] = scalar[0] * src[i], the scalar read on the device.
cudaError_t scale_by_device_scalar(const float* src, const float* scalar, float* dst, int64_t n, cudaStream_t s);

cudaError_t gelu_forward(const float* x, float* y, int64_t n, cudaStream_t s);

cudaError_t gelu_backward(const float* dy, const float* x, float inv_sqrt_2pi, float* dx, int64_t n, cudaStream_t s);

// mask[i] = u(seed, i) >= p ? keep : 0 with the CPU backend's counter-based hash.
cudaError_t dropout_mask(float* mask, int64_t n, float p, float keep, uint64_t seed, cudaStream_t s);

// y = min(max(x, 0), ceiling) over n storage elements (0 stays 0, so padded channels stay zero;
// NaN gives 0, as on the CPU).
cudaError_t clipped_relu_forward(const float* x, float ceiling, float* y, int64_t n, cudaStream_t s);

// dx = dy where 0 < y < ceiling, else 0 (hardtanh's convention at the clips).
cudaError_t clipped_relu_backward(const float* dy, const float* y, float ceiling, float* dx, int64_t n, cudaStream_t s);

cudaError_t exp_forward(const float* x, float* y, int64_t n, cudaStream_t s);

// The bias of a convolution or linear layer: y[n, c, hw] += bias[c].
cudaError_t add_channel_bias(float* y, const float* bias, int64_t n, int64_t c, int64_t hw, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
