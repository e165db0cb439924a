#pragma once
// Internal to the kernel files (*.cu): the launch geometry they share. Kernels are grid-stride
// loops over n elements in blocks of kThreads (the grid capped at kMaxBlocks), or one warp per
// row where a row is reduced.
#include <cstdint>

namespace ts::engine::cuda::kernels {

inline constexpr int kThreads = 256;   // a power of two: the block reductions rely on it
inline constexpr int kWarp = 32;
inline constexpr int64_t kMaxBlocks = int64_t{1} << 20;
inline constexpr unsigned kFullMask = 0xffffffffu;

// Blocks of kThreads for n elements: at least one, at most kMaxBlocks (the loops stride).
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  if (b > kMaxBlocks) b = kMaxBlocks;
  return static_cast<unsigned>(b);
}

__device__ __forceinline__ int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }
__device__ __forceinline__ int64_t global_warp() { return global_index() / kWarp; }
__device__ __forceinline__ int64_t warp_stride() { return grid_stride() / kWarp; }

}  // namespace ts::engine::cuda::kernels
