#pragma once
// Internal to engine/cuda/: launchers of reduce.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers, sizes
// element counts.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

// --- reductions ---
// Partial sums kept in double (like the CPU backend's total): how many doubles `partials`
// must hold for n elements.
int sum_partials(int64_t n);

// out[0] = scale * sum(x[0..n)), deterministic (fixed partition and order).
cudaError_t sum_all(const float* x, int64_t n, double* partials, float scale, float* out, cudaStream_t s);

// Per-channel sums of a [n, c, hw] tensor: out1[c] = sum dy; when x is non-null also
// out2[c] = sum dy * (x - mean[c]) * out2_scale[c] (mean and out2_scale are [c]).
// `partials` holds channel_partials(n, c, hw) doubles.
int channel_splits(int64_t n, int64_t c, int64_t hw);

int64_t channel_partials(int64_t n, int64_t c, int64_t hw);

cudaError_t channel_sums(const float* dy, const float* x, const float* mean, const float* out2_scale, int64_t n,
                         int64_t c, int64_t hw, double* partials, float* out1, float* out2, cudaStream_t s);

// out[j] = sum over rows i of a [rows, cols] matrix (linear's bias gradient).
cudaError_t column_sums(const float* a, int64_t rows, int64_t cols, float* out, cudaStream_t s);

// out[0] = sum x_i^2 in double. `partials` holds sum_partials(n) doubles.
cudaError_t sum_squares(const float* x, int64_t n, double* partials, float* out, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
