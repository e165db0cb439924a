#pragma once
// Internal to the kernel files (*.cu): the reductions they share, over a block (through shared
// memory, in a fixed order, so results do not change from run to run) and over a warp
// (butterfly shuffles: every lane ends with the same value). Sums are kept in double, as the CPU
// backend's are.
#include <cstdint>

#include "engine/cuda/kernel_grid.cuh"

namespace ts::engine::cuda::kernels {

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces one value per thread over the block (blockDim.x a power of two, <= kThreads);
// every thread gets the result. `shared` holds blockDim.x values.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const T r = shared[0];
  __syncthreads();
  return r;
}

__device__ __forceinline__ double block_sum(double v, double* shared) { return block_reduce(v, SumOp{}, shared); }
__device__ __forceinline__ float block_max(float v, float* shared) { return block_reduce(v, MaxOp{}, shared); }

__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// A sum in two passes: blocks of partial sums (at most kSumBlocks, 4 elements per thread), then
// finish_sum over the partials.
inline constexpr int kSumBlocks = 1024;
inline int sum_blocks(int64_t n) {
  int64_t b = (n + int64_t{kThreads} * 4 - 1) / (int64_t{kThreads} * 4);
  if (b < 1) b = 1;
  if (b > kSumBlocks) b = kSumBlocks;
  return static_cast<int>(b);
}

// out[0] = (sum of `count` doubles) / divisor when divisor > 0, else * scale; one block
// (reduce.cu).
cudaError_t finish_sum(const double* partials, int64_t count, double scale, double divisor, float* out,
                       cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
