#pragma once
// Internal to engine/cuda/: launchers of pool.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers, sizes
// element counts.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

// --- pooling over planes = n * c planes of h x w (plain NCHW) ---
struct PoolGeom {
  int64_t planes = 0;
  int h = 0, w = 0, oh = 0, ow = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
};

// y and argmax ([planes, oh, ow]; the index h * w + w of the first maximum in the window).
cudaError_t max_pool_forward(const float* x, const PoolGeom& g, float* y, int32_t* argmax, cudaStream_t s);

// dx (every element written) from dy and argmax, gathering over the windows that cover
// each input element (deterministic; no atomics).
cudaError_t max_pool_backward(const float* dy, const int32_t* argmax, const PoolGeom& g, float* dx, cudaStream_t s);

cudaError_t avg_pool_forward(const float* x, const PoolGeom& g, bool count_include_pad, float* y, cudaStream_t s);

cudaError_t avg_pool_backward(const float* dy, const PoolGeom& g, bool count_include_pad, float* dx, cudaStream_t s);

// Storage seen as [outer][h][w][vec] (plain: outer = N C, vec 1; channels-last: N, C;
// blocked: N ceil(C/b), b). y is [outer][h f][w f][vec].
cudaError_t upsample_nearest_forward(const float* x, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                     float* y, cudaStream_t s);

// dx [outer][h][w][vec] from dy [outer][h f][w f][vec]: each f x f window summed.
cudaError_t upsample_nearest_backward(const float* dy, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                      float* dx, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
