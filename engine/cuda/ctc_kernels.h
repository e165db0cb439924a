#pragma once
// Internal to engine/cuda/: the launcher of ctc.cu. It queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

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
