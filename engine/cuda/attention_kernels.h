#pragma once
// Internal to engine/cuda/: launchers of attention.cu. Each queues its work on `stream` and returns
// the launch's error for the caller's TS_CUDA_CHECK; pointers are device pointers, sizes
// element counts.
#include <cuda_runtime_api.h>
#include <cstdint>

namespace ts::engine::cuda::kernels {

// Masked softmax in place over rows of tk scores, rows ordered [b][heads][tq]; key_lengths
// (fp32 [b]) may be null; causal hides keys j > i.
cudaError_t attention_softmax(float* scores, int64_t b, int64_t heads, int64_t tq, int64_t tk, const float* key_lengths,
                              bool causal, cudaStream_t s);

// ds = p * (ds - rowsum(p * ds)) per row of tk.
cudaError_t attention_softmax_backward(const float* p, float* ds, int64_t rows, int64_t tk, cudaStream_t s);

// query [b, a], keys [b, s, a], values [b, s, d], v [a].
struct AdditiveAttentionDims {
  int64_t b = 0, s = 0, a = 0, d = 0;
};

// probs [b, s] = softmax over j < lengths[i] of score_j = v . tanh(query + keys_j) (0 past the
// length; a row without keys is all 0), context [b, d] = sum_j probs_j values_j. lengths: fp32
// [b] holding integers in [0, s], checked by the caller; null: every row has all s keys.
cudaError_t additive_attention_forward(const float* query, const float* keys, const float* values, const float* v,
                                       const float* lengths, const AdditiveAttentionDims& dims, float* probs,
                                       float* context, cudaStream_t s);

// How many floats of workspace additive_attention_backward needs.
int64_t additive_attention_backward_workspace(const AdditiveAttentionDims& dims);

// The gradients from dcontext [b, d] and forward's probs [b, s]; each row's keys are those up to
// its last nonzero probability (what the CPU backend uses). Every output element is written.
cudaError_t additive_attention_backward(const float* dcontext, const float* query, const float* keys,
                                        const float* values, const float* v, const float* probs,
                                        const AdditiveAttentionDims& dims, float* workspace, float* dquery,
                                        float* dkeys, float* dvalues, float* dv, cudaStream_t s);

}  // namespace ts::engine::cuda::kernels
