#pragma once
// Internal to engine/cuda/: launchers of the backend's own kernels (cuda_backend.cu): fill and
// layout conversion. Each queues its work on `stream` and returns the launch's error
// (cudaGetLastError) for the caller's TS_CUDA_CHECK: the kernels library then needs nothing from
// the rest of the engine. Pointers are device pointers; sizes are element counts.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ts::engine::cuda::kernels {

// A 4-D layout as the kernels see it: 0 plain NCHW, 1 channels-last NHWC, 2 channel-blocked
// N, ceil(C/b), H, W, b (channels past C are padding and hold zeros).
struct Layout4 {
  int kind = 0;
  int block = 0;
};

cudaError_t fill(float* p, int64_t n, float value, cudaStream_t s);
// Channel-blocked storage of [n, c, inner...]: `value` everywhere except padded channels (0).
cudaError_t fill_blocked(float* p, int64_t n, int64_t c, int64_t inner, int block, float value, cudaStream_t s);
// dst (layout `to`) = src (layout `from`), a 4-D [n, c, h, w] tensor. When `to` has padded
// channels the caller zeroes dst first.
cudaError_t reorder4d(const float* src, Layout4 from, float* dst, Layout4 to, int64_t n, int64_t c, int64_t h,
                      int64_t w, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
