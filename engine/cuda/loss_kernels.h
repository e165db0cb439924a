#pragma once
// Internal to engine/cuda/: launchers of loss.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers, sizes
// element counts.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

// --- softmax cross-entropy over [n, k] logits, labels [n] as fp32 class indices ---
// probs = softmax(logits); row_loss[i] = logsumexp(z_i) - z_i[label_i].
cudaError_t softmax_xent_forward(const float* logits, const float* labels, int64_t n, int64_t k, float* probs,
                                 float* row_loss, cudaStream_t s);

// dx = (dloss[0] / n) * (probs - onehot(labels)); dloss is read on the device.
cudaError_t softmax_xent_backward(const float* dloss, const float* probs, const float* labels, int64_t n, int64_t k,
                                  float* dx, cudaStream_t s);

// x [n, d]: norms[i] = ||x_i|| (double sums); loss[0] = mean_i (norms_i - target)^2.
// `terms` holds n doubles.
cudaError_t norm_penalty_forward(const float* x, int64_t n, int64_t d, float target, float* norms, double* terms,
                                 float* loss, cudaStream_t s);

// dx_i = dloss[0] 2 (norm_i - target) / (n norm_i) x_i, 0 where norm_i = 0; dloss read on the device.
cudaError_t norm_penalty_backward(const float* dloss, const float* x, const float* norms, int64_t n, int64_t d,
                                  float target, float* dx, cudaStream_t s);

// out[0] = scale * sum_i w_i l(|x_i - t_i|) in double; weights may be null (ones).
// `partials` holds sum_partials(n) doubles.
cudaError_t smooth_l1_forward(const float* x, const float* t, const float* w, int64_t n, float beta, float scale,
                              double* partials, float* out, cudaStream_t s);

// dx_i = dloss[0] scale w_i dl/dd, dloss read on the device.
cudaError_t smooth_l1_backward(const float* dloss, const float* x, const float* t, const float* w, int64_t n,
                               float beta, float scale, float* dx, cudaStream_t s);

// Label-smoothed cross-entropy: lse [n]; loss[0] = sum of row terms / normalizer. `terms` holds n doubles.
cudaError_t label_smoothed_ce_forward(const float* logits, const float* labels, int64_t n, int64_t vocab, float eps,
                                      int64_t ignore_index, float normalizer, float* lse, double* terms, float* loss,
                                      cudaStream_t s);

cudaError_t label_smoothed_ce_backward(const float* dloss, const float* logits, const float* lse, const float* labels,
                                       int64_t n, int64_t vocab, float eps, int64_t ignore_index, float normalizer,
                                       float* dx, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
