// The backend's own kernels: fill (channel-blocked padding kept zero) and 4-D layout
// reorders, simple grid-stride loops (memory-bound).
#include <cfloat>
#include <cmath>

#include "engine/cuda/cuda_backend_kernels.h"
#include "engine/cuda/kernel_grid.cuh"

namespace ts::engine::cuda::kernels {

namespace {

__device__ __forceinline__ int64_t offset4(Layout4 l, int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H,
                                           int64_t W) {
  switch (l.kind) {
    case 1: return ((n * H + h) * W + w) * C + c;
    case 2: {
      const int64_t b = l.block, cb = (C + b - 1) / b;
      return (((n * cb + c / b) * H + h) * W + w) * b + c % b;
    }
    default: return ((n * C + c) * H + h) * W + w;
  }
}

// ------------------------------------------------------------------ memory and layout

__global__ void fill_kernel(float* p, int64_t n, float v) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) p[i] = v;
}

__global__ void fill_blocked_kernel(float* p, int64_t total, int64_t c, int64_t inner, int block, float v) {
  const int64_t cb = (c + block - 1) / block;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t k = i % block;
    const int64_t cblk = (i / (block * inner)) % cb;
    p[i] = (cblk * block + k < c) ? v : 0.0f;
  }
}

__global__ void reorder4d_kernel(const float* src, Layout4 from, float* dst, Layout4 to, int64_t N, int64_t C,
                                 int64_t H, int64_t W) {
  const int64_t total = N * C * H * W;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t w = i % W;
    int64_t t = i / W;
    const int64_t h = t % H;
    t /= H;
    const int64_t c = t % C;
    const int64_t n = t / C;
    dst[offset4(to, n, c, h, w, C, H, W)] = src[offset4(from, n, c, h, w, C, H, W)];
  }
}

}  // namespace

// ------------------------------------------------------------------ launchers

cudaError_t fill(float* p, int64_t n, float value, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, n, value);
  return cudaGetLastError();
}

cudaError_t fill_blocked(float* p, int64_t n, int64_t c, int64_t inner, int block, float value, cudaStream_t s) {
  const int64_t total = n * ((c + block - 1) / block) * inner * block;
  if (total <= 0) return cudaSuccess;
  fill_blocked_kernel<<<blocks_for(total), kThreads, 0, s>>>(p, total, c, inner, block, value);
  return cudaGetLastError();
}

cudaError_t reorder4d(const float* src, Layout4 from, float* dst, Layout4 to, int64_t n, int64_t c, int64_t h,
                      int64_t w, cudaStream_t s) {
  const int64_t total = n * c * h * w;
  if (total <= 0) return cudaSuccess;
  reorder4d_kernel<<<blocks_for(total), kThreads, 0, s>>>(src, from, dst, to, n, c, h, w);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
