// The layout family's kernels: rows copied at a pitch (concat, slice), the row gather/scatter and
// permute.
#include <cfloat>
#include <cmath>

#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/layout_kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

__global__ void copy_rows_kernel(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t width,
                                 int64_t rows) {
  const int64_t total = width * rows;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t r = i / width, col = i % width;
    dst[r * dst_pitch + col] = src[r * src_pitch + col];
  }
}

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

cudaError_t copy_rows(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t width, int64_t rows,
                      cudaStream_t s) {
  const int64_t total = width * rows;
  if (total <= 0) return cudaSuccess;
  copy_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(dst, dst_pitch, src, src_pitch, width, rows);
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
