// The softmax family's kernels: log-softmax, one warp per row, written in the CPU backend's order
// of operations and precision (cpu/softmax.cpp): it differs only in the order of its double sums
// and in expf's last bits.
#include <cmath>

#include "engine/cuda/block_reduce.cuh"
#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/softmax_kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

// Blocks of kThreads for one warp per row.
unsigned blocks_for_rows(int64_t rows) {
  constexpr int64_t per_block = kThreads / kWarp;
  int64_t b = (rows + per_block - 1) / per_block;
  if (b < 1) b = 1;
  if (b > kMaxBlocks) b = kMaxBlocks;
  return static_cast<unsigned>(b);
}

// Rows are short (A3C: one per state, k = the game's actions), so a warp per row; the row loop
// is uniform across a warp, as the shuffles need. fmaxf skips NaN where the CPU's std::max may
// keep one, but a NaN anywhere in a row makes the sum, and so every output of the row, NaN on both.

__global__ void log_softmax_forward_kernel(const float* x, int64_t m, int64_t k, float* y) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  for (int64_t r = global_warp(); r < m; r += warp_stride()) {
    const float* xr = x + r * k;
    float* yr = y + r * k;
    float mx = -INFINITY;
    for (int64_t j = lane; j < k; j += kWarp) mx = fmaxf(mx, xr[j]);
    mx = warp_max(mx);
    double s = 0.0;
    for (int64_t j = lane; j < k; j += kWarp) s += exp(static_cast<double>(xr[j] - mx));
    s = warp_sum(s);
    const auto lse = static_cast<float>(static_cast<double>(mx) + log(s));
    for (int64_t j = lane; j < k; j += kWarp) yr[j] = xr[j] - lse;
  }
}

__global__ void log_softmax_backward_kernel(const float* dy, const float* y, int64_t m, int64_t k, float* dx) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  for (int64_t r = global_warp(); r < m; r += warp_stride()) {
    const float* g = dy + r * k;
    const float* yr = y + r * k;
    float* d = dx + r * k;
    double s = 0.0;
    for (int64_t j = lane; j < k; j += kWarp) s += g[j];
    const auto sf = static_cast<float>(warp_sum(s));
    for (int64_t j = lane; j < k; j += kWarp) d[j] = g[j] - expf(yr[j]) * sf;
  }
}

// ------------------------------------------------------------------ RMSProp
// Several host threads may queue this on the same tensors (A3C's Hogwild learners): the
// device's one stream runs the launches one after another, so none loses another's update.

}  // namespace

// ------------------------------------------------------------------ launchers

cudaError_t log_softmax_forward(const float* x, int64_t m, int64_t k, float* y, cudaStream_t s) {
  if (m <= 0 || k <= 0) return cudaSuccess;
  log_softmax_forward_kernel<<<blocks_for_rows(m), kThreads, 0, s>>>(x, m, k, y);
  return cudaGetLastError();
}

cudaError_t log_softmax_backward(const float* dy, const float* y, int64_t m, int64_t k, float* dx, cudaStream_t s) {
  if (m <= 0 || k <= 0) return cudaSuccess;
  log_softmax_backward_kernel<<<blocks_for_rows(m), kThreads, 0, s>>>(dy, y, m, k, dx);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
