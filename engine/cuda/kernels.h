#pragma once
// Internal to engine/cuda/: launchers of our own kernels (kernels.cu). Each queues its work
// on `stream` and returns the launch's error (cudaGetLastError) for the caller's
// TS_CUDA_CHECK: the kernels library then needs nothing from the rest of the engine.
// Pointers are device pointers; sizes are element counts.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ts::engine::cuda::kernels {

// A 4-D layout as the kernels see it: 0 plain NCHW, 1 channels-last NHWC, 2 channel-blocked
// N, ceil(C/b), H, W, b (channels past C are padding and hold zeros).
struct Layout4 {
  int kind = 0;
  int block = 0;
};

cudaError_t fill(float* p, int64_t n, float value, cudaStream_t s);
// Channel-blocked storage of [n, c, inner...]: `value` everywhere except padded channels (0).
cudaError_t fill_blocked(float* p, int64_t n, int64_t c, int64_t inner, int block, float value, cudaStream_t s);
// dst (layout `to`) = src (layout `from`), a 4-D [n, c, h, w] tensor. When `to` has padded
// channels the caller zeroes dst first.
cudaError_t reorder4d(const float* src, Layout4 from, float* dst, Layout4 to, int64_t n, int64_t c, int64_t h,
                      int64_t w, cudaStream_t s);

// ------------------------------------------------------------------ kernels_extra.cu
// (compiled without FMA contraction, so that the arithmetic rounds as the CPU backend's does)

// ------------------------------------------------------------------ kernels_seq.cu
// (sequence models and CTC; also without FMA contraction)

// CTC over logits [t_max, n, k]. Per sample i: frames[i], lengths[i], offsets[i] (into labels)
// and weight[i]; labels are validated class ids. Workspace (doubles): lp n * t_max * k,
// alpha n * t_max * s_max, beta n * 2 * s_max, contrib n; s_max = 2 max(lengths) + 1.
// grad (may be null) must be zeroed by the caller; frames past frames[i] stay zero.
struct CtcArgs {
  const float* logits = nullptr;
  int64_t t_max = 0, n = 0, k = 0, s_max = 1;
  const int64_t* frames = nullptr;
  const int64_t* lengths = nullptr;
  const int64_t* offsets = nullptr;
  const int64_t* labels = nullptr;
  const double* weights = nullptr;
  int64_t blank = 0;
  bool zero_infinity = false;
  double* lp = nullptr;
  double* alpha = nullptr;
  double* beta = nullptr;
  double* contrib = nullptr;
  float* nll = nullptr;   // [n]
  float* loss = nullptr;  // [1]: contributions summed in sample order
  float* grad = nullptr;  // [t_max, n, k] or null
};
cudaError_t ctc_loss(const CtcArgs& a, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
