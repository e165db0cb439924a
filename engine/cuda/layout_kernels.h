#pragma once
// Internal to engine/cuda/: launchers of layout.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers, sizes
// element counts.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

// dst[r, :width] = src[r, :width] for each of `rows` rows (concat, slice), at pitches in floats.
cudaError_t copy_rows(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t width, int64_t rows,
                      cudaStream_t s);

// y[i, :] = x[index[i], :] (index fp32, validated by the caller), rows of k floats.
cudaError_t index_select_rows(const float* x, const float* index, int64_t m, int64_t k, float* y, cudaStream_t s);

// y (zeroed by the caller) [index[i], :] += src[i, :], in order of i (one thread per column:
// deterministic, the CPU's summation order).
cudaError_t index_add_rows(const float* src, const float* index, int64_t m, int64_t k, float* y, cudaStream_t s);

inline constexpr int kMaxPermuteRank = 8;

struct PermuteGeom {
  int rank = 0;
  int64_t out_shape[kMaxPermuteRank] = {};
  int64_t src_strides[kMaxPermuteRank] = {};  // stride in x of each output dimension
};

cudaError_t permute(const float* x, const PermuteGeom& g, int64_t n, float* y, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
