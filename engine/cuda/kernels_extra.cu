// Kernels of nearest upsampling (the other families have files of their own), written in the
// CPU backend's order of operations.
#include <cfloat>
#include <cmath>

#include "engine/cuda/block_reduce.cuh"
#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

// ------------------------------------------------------------------ tanh, upsampling

__global__ void upsample_forward_kernel(const float* x, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                        float* y) {
  const int64_t oh = h * f, ow = w * f;
  const int64_t total = outer * oh * ow * vec;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t k = i % vec;
    int64_t t = i / vec;
    const int64_t j = t % ow;
    t /= ow;
    const int64_t r = t % oh;
    const int64_t o = t / oh;
    y[i] = x[((o * h + r / f) * w + j / f) * vec + k];
  }
}

__global__ void upsample_backward_kernel(const float* dy, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                         float* dx) {
  const int64_t oh = h * f, ow = w * f;
  const int64_t total = outer * h * w * vec;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t k = i % vec;
    int64_t t = i / vec;
    const int64_t j = t % w;
    t /= w;
    const int64_t r = t % h;
    const int64_t o = t / h;
    float acc = 0.0f;
    for (int64_t a = 0; a < f; ++a) {
      const float* row = dy + ((o * oh + r * f + a) * ow + j * f) * vec + k;
      for (int64_t b = 0; b < f; ++b) acc += row[b * vec];
    }
    dx[i] = acc;
  }
}

// ------------------------------------------------------------------ rows, permute

}  // namespace

// ------------------------------------------------------------------ launchers

cudaError_t upsample_nearest_forward(const float* x, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                     float* y, cudaStream_t s) {
  const int64_t total = outer * h * f * w * f * vec;
  if (total <= 0) return cudaSuccess;
  upsample_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, outer, h, w, vec, f, y);
  return cudaGetLastError();
}

cudaError_t upsample_nearest_backward(const float* dy, int64_t outer, int64_t h, int64_t w, int64_t vec, int64_t f,
                                      float* dx, cudaStream_t s) {
  const int64_t total = outer * h * w * vec;
  if (total <= 0) return cudaSuccess;
  upsample_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, outer, h, w, vec, f, dx);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
