// The reduction family's kernels: sums over everything, per channel and per column, in double
// with a fixed partition and order, so that results do not change from run to run.
#include <cfloat>
#include <cmath>

#include "engine/cuda/block_reduce.cuh"
#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/reduce_kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

constexpr int kChannelBlocks = 2048;  // channel_sums aims at about this many blocks

__global__ void sum_partials_kernel(const float* x, int64_t n, double* partials) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (int64_t i = global_index(); i < n; i += grid_stride()) acc += static_cast<double>(x[i]);
  const double total = block_reduce(acc, SumOp{}, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_finish_kernel(const double* partials, int count, float scale, float* out) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += blockDim.x) acc += partials[i];
  const double total = block_reduce(acc, SumOp{}, shared);
  if (threadIdx.x == 0) out[0] = static_cast<float>(total * static_cast<double>(scale));
}

// Block (channel, split): split s takes images s, s + splits, ...; partials[(c * splits + s) * 2 + {0, 1}].
__global__ void channel_sums_kernel(const float* dy, const float* x, const float* mean, int64_t n, int64_t c,
                                    int64_t hw, int splits, double* partials) {
  __shared__ double shared[kThreads];
  const int64_t ch = blockIdx.x;
  const int s = static_cast<int>(blockIdx.y);
  const float m = x ? mean[ch] : 0.0f;
  double acc1 = 0.0, acc2 = 0.0;
  for (int64_t img = s; img < n; img += splits) {
    const int64_t base = (img * c + ch) * hw;
    for (int64_t j = threadIdx.x; j < hw; j += blockDim.x) {
      const float g = dy[base + j];
      acc1 += g;
      if (x) acc2 += static_cast<double>(g) * static_cast<double>(x[base + j] - m);
    }
  }
  const double t1 = block_reduce(acc1, SumOp{}, shared);
  const double t2 = block_reduce(acc2, SumOp{}, shared);
  if (threadIdx.x == 0) {
    partials[(ch * splits + s) * 2] = t1;
    partials[(ch * splits + s) * 2 + 1] = t2;
  }
}

__global__ void channel_sums_finish_kernel(const double* partials, int64_t c, int splits, const float* out2_scale,
                                           float* out1, float* out2) {
  for (int64_t ch = global_index(); ch < c; ch += grid_stride()) {
    double t1 = 0.0, t2 = 0.0;
    for (int s = 0; s < splits; ++s) {
      t1 += partials[(ch * splits + s) * 2];
      t2 += partials[(ch * splits + s) * 2 + 1];
    }
    out1[ch] = static_cast<float>(t1);
    if (out2) out2[ch] = static_cast<float>(t2 * (out2_scale ? static_cast<double>(out2_scale[ch]) : 1.0));
  }
}

__global__ void column_sums_kernel(const float* a, int64_t rows, int64_t cols, float* out) {
  for (int64_t j = global_index(); j < cols; j += grid_stride()) {
    double acc = 0.0;
    for (int64_t i = 0; i < rows; ++i) acc += a[i * cols + j];
    out[j] = static_cast<float>(acc);
  }
}

__global__ void sum_squares_partials_kernel(const float* x, int64_t n, double* partials) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (int64_t i = global_index(); i < n; i += grid_stride()) acc += static_cast<double>(x[i]) * x[i];
  const double total = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// out[0] = (sum of count doubles) * scale, or / divisor when divisor > 0.
__global__ void finish_sum_kernel(const double* partials, int64_t count, double scale, double divisor, float* out) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  const double total = block_sum(acc, shared);
  if (threadIdx.x == 0) out[0] = static_cast<float>(divisor > 0.0 ? total / divisor : total * scale);
}

}  // namespace

int sum_partials(int64_t n) {
  int64_t b = (n + int64_t{kThreads} * 4 - 1) / (int64_t{kThreads} * 4);
  if (b < 1) b = 1;
  if (b > kSumBlocks) b = kSumBlocks;
  return static_cast<int>(b);
}

cudaError_t sum_all(const float* x, int64_t n, double* partials, float scale, float* out, cudaStream_t s) {
  const int blocks = sum_partials(n);
  sum_partials_kernel<<<blocks, kThreads, 0, s>>>(x, n < 0 ? 0 : n, partials);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  sum_finish_kernel<<<1, kThreads, 0, s>>>(partials, blocks, scale, out);
  return cudaGetLastError();
}

int channel_splits(int64_t n, int64_t c, int64_t hw) {
  (void)hw;
  if (n <= 0 || c <= 0) return 1;
  int64_t s = (kChannelBlocks + c - 1) / c;
  if (s > n) s = n;
  if (s > 65535) s = 65535;  // gridDim.y
  return static_cast<int>(s < 1 ? 1 : s);
}

int64_t channel_partials(int64_t n, int64_t c, int64_t hw) { return c * channel_splits(n, c, hw) * 2; }

cudaError_t channel_sums(const float* dy, const float* x, const float* mean, const float* out2_scale, int64_t n,
                         int64_t c, int64_t hw, double* partials, float* out1, float* out2, cudaStream_t s) {
  if (c <= 0) return cudaSuccess;
  const int splits = channel_splits(n, c, hw);
  dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(splits));
  channel_sums_kernel<<<grid, kThreads, 0, s>>>(dy, x, mean, n, c, hw, splits, partials);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  channel_sums_finish_kernel<<<blocks_for(c), kThreads, 0, s>>>(partials, c, splits, out2_scale, out1,
                                                                x ? out2 : nullptr);
  return cudaGetLastError();
}

cudaError_t column_sums(const float* a, int64_t rows, int64_t cols, float* out, cudaStream_t s) {
  if (cols <= 0) return cudaSuccess;
  column_sums_kernel<<<blocks_for(cols), kThreads, 0, s>>>(a, rows, cols, out);
  return cudaGetLastError();
}

cudaError_t sum_squares(const float* x, int64_t n, double* partials, float* out, cudaStream_t s) {
  const int blocks = sum_blocks(n);
  sum_squares_partials_kernel<<<blocks, kThreads, 0, s>>>(x, n < 0 ? 0 : n, partials);
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  finish_sum_kernel<<<1, kThreads, 0, s>>>(partials, blocks, 1.0, 0.0, out);
  return cudaGetLastError();
}

cudaError_t finish_sum(const double* partials, int64_t count, double scale, double divisor, float* out,
                       cudaStream_t s) {
  finish_sum_kernel<<<1, kThreads, 0, s>>>(partials, count, scale, divisor, out);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
