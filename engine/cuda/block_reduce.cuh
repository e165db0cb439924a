#pragma once
// Internal to the kernel files (*.cu): the reductions they share, over a warp (butterfly
// shuffles: every lane ends with the same value) and over a block, in a fixed order, so results
// do not change from run to run. Sums are kept in double, as the CPU backend's are.
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
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};

inline constexpr int kWarps = kThreads / kWarp;

template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, MaxOp{}); }
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, SumOp{}); }
__device__ __forceinline__ double warp_sum(double v) { return warp_reduce(v, SumOp{}); }

// Reduces one value per thread over the block as a tree (blockDim.x a power of two,
// <= kThreads); every thread gets the result. `shared` holds blockDim.x values.
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

// The same over a block of exactly kThreads threads, by warps: each warp reduced by shuffles,
// the kWarps results combined by every thread in warp order. `shared` holds only kWarps values;
// the trailing barrier lets the caller reuse it at once.
template <class T, class Op>
__device__ __forceinline__ T block_reduce_by_warps(T v, Op op, T* shared) {
  v = warp_reduce(v, op);
  if (threadIdx.x % kWarp == 0) shared[threadIdx.x / kWarp] = v;
  __syncthreads();
  T r = shared[0];
  for (int w = 1; w < kWarps; ++w) r = op(r, shared[w]);
  __syncthreads();
  return r;
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
