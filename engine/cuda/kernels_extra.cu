// Kernels of nearest upsampling, the row gather/scatter and permute (the other families have
// files of their own), written in the CPU backend's order of operations.
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

__global__ void index_select_rows_kernel(const float* x, const float* index, int64_t m, int64_t k, float* y) {
  const int64_t total = m * k;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t row = static_cast<int64_t>(index[i / k]);
    y[i] = x[row * k + i % k];
  }
}

__global__ void index_add_rows_kernel(const float* src, const float* index, int64_t m, int64_t k, float* y) {
  for (int64_t j = global_index(); j < k; j += grid_stride()) {
    for (int64_t i = 0; i < m; ++i) {
      const int64_t row = static_cast<int64_t>(index[i]);
      y[row * k + j] += src[i * k + j];
    }
  }
}

__global__ void permute_kernel(const float* x, PermuteGeom g, int64_t n, float* y) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t rem = i, src = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t sz = g.out_shape[d];
      src += (rem % sz) * g.src_strides[d];
      rem /= sz;
    }
    y[i] = x[src];
  }
}

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

cudaError_t index_select_rows(const float* x, const float* index, int64_t m, int64_t k, float* y, cudaStream_t s) {
  const int64_t total = m * k;
  if (total <= 0) return cudaSuccess;
  index_select_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, index, m, k, y);
  return cudaGetLastError();
}

cudaError_t index_add_rows(const float* src, const float* index, int64_t m, int64_t k, float* y, cudaStream_t s) {
  if (m <= 0 || k <= 0) return cudaSuccess;
  index_add_rows_kernel<<<blocks_for(k), kThreads, 0, s>>>(src, index, m, k, y);
  return cudaGetLastError();
}

cudaError_t permute(const float* x, const PermuteGeom& g, int64_t n, float* y, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, g, n, y);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
