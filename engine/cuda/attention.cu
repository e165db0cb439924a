// The attention family's kernels, written in the CPU backend's order of operations and precision
// (cpu/attention.cpp). Multi-head attention's masked softmax over the key rows. Additive
// (Bahdanau) attention for one decoder step: float dot products over the attention units and the
// memory width, the softmax normaliser and the weighted sum of its backward in double, the
// context and dquery summed over keys in key order. They differ from the CPU in the order of the
// float dot products' additions (the CPU's SIMD lanes, a warp's butterfly here), in tanh (CUDA's
// tanhf against the CPU's polynomial, both within a few 1e-7) and in expf's last bits.
// Deterministic: no atomics; dv is summed from per-row partial sums in row order.
#include <cfloat>
#include <cmath>

#include "engine/cuda/attention_kernels.h"
#include "engine/cuda/block_reduce.cuh"
#include "engine/cuda/kernel_grid.cuh"

namespace ts::engine::cuda::kernels {

namespace {

__global__ void attention_softmax_kernel(float* scores, int64_t heads, int64_t tq, int64_t tk, const float* key_lengths,
                                         bool causal) {
  __shared__ float fshared[kThreads];
  __shared__ double dshared[kThreads];
  const int64_t r = blockIdx.x;
  const int64_t n = r / (heads * tq), i = r % tq;
  float* row = scores + r * tk;
  int64_t len = tk;
  if (key_lengths) {
    len = static_cast<int64_t>(key_lengths[n]);
    len = len < 0 ? 0 : (len > tk ? tk : len);
  }
  const int64_t valid = causal ? (len < i + 1 ? len : i + 1) : len;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) mx = fmaxf(mx, row[j]);
  mx = block_max(mx, fshared);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    row[j] = expf(row[j] - mx);
    sum += row[j];
  }
  sum = block_sum(sum, dshared);
  const float inv = valid > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) row[j] = j < valid ? row[j] * inv : 0.0f;
}

__global__ void attention_softmax_backward_kernel(const float* p, float* ds, int64_t tk) {
  __shared__ double shared[kThreads];
  const int64_t r = blockIdx.x;
  const float* prow = p + r * tk;
  float* row = ds + r * tk;
  double dot = 0;
  for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) dot += static_cast<double>(prow[j]) * row[j];
  dot = block_sum(dot, shared);
  for (int64_t j = threadIdx.x; j < tk; j += blockDim.x) row[j] = prow[j] * (row[j] - static_cast<float>(dot));
}

unsigned blocks_for_warps(int64_t warps) { return blocks_for(warps * kWarp); }

// One block per row (rows looped when there are more than kMaxBlocks).
unsigned blocks_for_rows(int64_t rows) { return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks); }

// The caller checked the lengths on the host: integers in [0, s].
__device__ __forceinline__ int64_t row_length(const float* lengths, int64_t b, int64_t s) {
  return lengths != nullptr ? static_cast<int64_t>(lengths[b]) : s;
}

// One warp per (row, key) pair w = b s + j below the row's length: the score v . tanh(q + k_j)
// over the a units, written into probs (the softmax then works in place, as on the CPU).
__global__ void scores_kernel(const float* q, const float* k, const float* v, const float* lengths, int64_t B,
                              int64_t S, int64_t A, float* probs) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  for (int64_t w = global_warp(); w < B * S; w += warp_stride()) {
    const int64_t b = w / S, j = w % S;
    if (j >= row_length(lengths, b, S)) continue;  // uniform across the warp
    const float* qb = q + b * A;
    const float* kj = k + w * A;
    float acc = 0.0f;
    for (int64_t a = lane; a < A; a += kWarp) acc += v[a] * tanhf(qb[a] + kj[a]);
    acc = warp_sum(acc);
    if (lane == 0) probs[w] = acc;
  }
}

// One block per row: the softmax over the row's first n scores (normaliser in double), zeros
// after them; a row with n = 0 is all zeros.
__global__ void softmax_kernel(const float* lengths, int64_t B, int64_t S, float* probs) {
  __shared__ float fshared[kWarps];
  __shared__ double dshared[kWarps];
  for (int64_t b = blockIdx.x; b < B; b += gridDim.x) {
    const int64_t n = row_length(lengths, b, S);
    float* p = probs + b * S;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, p[j]);
    mx = block_reduce_by_warps(mx, MaxOp{}, fshared);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float e = expf(p[j] - mx);
      p[j] = e;
      sum += e;
    }
    sum = block_reduce_by_warps(sum, SumOp{}, dshared);
    const float inv = n > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
    // Each thread rescales the entries it wrote itself.
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) p[j] = j < n ? p[j] * inv : 0.0f;
  }
}

// One thread per (row, unit of the memory width): context = sum_j p_j values_j in key order.
__global__ void context_kernel(const float* probs, const float* values, const float* lengths, int64_t B, int64_t S,
                               int64_t D, float* context) {
  for (int64_t idx = global_index(); idx < B * D; idx += grid_stride()) {
    const int64_t b = idx / D, dd = idx % D;
    const int64_t n = row_length(lengths, b, S);
    const float* p = probs + b * S;
    const float* val = values + b * S * D + dd;
    float c = 0.0f;
    for (int64_t j = 0; j < n; ++j) c += p[j] * val[j * D];
    context[idx] = c;
  }
}

// One block per row. n: one past the last nonzero probability (keys past the length have
// p = 0, and so no gradient; the CPU's rule). ds_j = p_j (dc . values_j - sum_k p_k dc .
// values_k) (the softmax's Jacobian; the dots a warp per key, the weighted sum in double)
// replaces its scratch row, 0 from n on; dvalues_j = p_j dc (0 from n on); counts[b] = n.
__global__ void backward_rows_kernel(const float* dcontext, const float* values, const float* probs, int64_t B,
                                     int64_t S, int64_t D, float* ds, int64_t* counts, float* dvalues) {
  __shared__ int64_t ishared[kWarps];
  __shared__ double dshared[kWarps];
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int warp = static_cast<int>(threadIdx.x / kWarp);
  for (int64_t b = blockIdx.x; b < B; b += gridDim.x) {
    const float* p = probs + b * S;
    const float* dc = dcontext + b * D;
    float* dsb = ds + b * S;
    int64_t last = 0;
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
      if (p[j] != 0.0f) last = j + 1;
    }
    const int64_t n = block_reduce_by_warps(last, MaxOp{}, ishared);
    for (int64_t j = warp; j < n; j += kWarps) {
      const float* val = values + (b * S + j) * D;
      float acc = 0.0f;
      for (int64_t k = lane; k < D; k += kWarp) acc += dc[k] * val[k];
      acc = warp_sum(acc);
      if (lane == 0) dsb[j] = acc;
    }
    __syncthreads();  // the dots, written by lane 0 of their warps, are read by other threads below
    double weighted = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) weighted += static_cast<double>(p[j]) * dsb[j];
    const auto wf = static_cast<float>(block_reduce_by_warps(weighted, SumOp{}, dshared));
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) dsb[j] = j < n ? p[j] * (dsb[j] - wf) : 0.0f;
    float* dvb = dvalues + b * S * D;
    for (int64_t idx = threadIdx.x; idx < S * D; idx += blockDim.x) {
      const int64_t j = idx / D;
      dvb[idx] = j < n ? p[j] * dc[idx % D] : 0.0f;
    }
    if (threadIdx.x == 0) counts[b] = n;
  }
}

// One thread per (row, attention unit), keys in order, tanh recomputed: with t = tanh(q + k_j),
// dkeys_j = ds_j v (1 - t^2) (0 from n on), dquery = sum_j dkeys_j, and the row's share of dv,
// sum_j ds_j t, into dv_part.
__global__ void backward_keys_kernel(const float* q, const float* keys, const float* v, const float* ds,
                                     const int64_t* counts, int64_t B, int64_t S, int64_t A, float* dquery,
                                     float* dkeys, float* dv_part) {
  for (int64_t idx = global_index(); idx < B * A; idx += grid_stride()) {
    const int64_t b = idx / A, a = idx % A;
    const int64_t n = counts[b];
    const float qa = q[idx], va = v[a];
    const float* dsb = ds + b * S;
    const float* kb = keys + b * S * A + a;
    float* dkb = dkeys + b * S * A + a;
    float dq = 0.0f, dvp = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float dsj = dsb[j];
      const float t = tanhf(qa + kb[j * A]);
      const float g = dsj * va * (1.0f - t * t);
      dkb[j * A] = g;
      dq += g;
      dvp += dsj * t;
    }
    for (int64_t j = n; j < S; ++j) dkb[j * A] = 0.0f;
    dquery[idx] = dq;
    dv_part[idx] = dvp;
  }
}

// dv = the rows' partial sums added in row order (a fixed order: the same bits every run).
__global__ void backward_dv_kernel(const float* dv_part, int64_t B, int64_t A, float* dv) {
  for (int64_t a = global_index(); a < A; a += grid_stride()) {
    float acc = 0.0f;
    for (int64_t b = 0; b < B; ++b) acc += dv_part[b * A + a];
    dv[a] = acc;
  }
}

}  // namespace

cudaError_t attention_softmax(float* scores, int64_t b, int64_t heads, int64_t tq, int64_t tk, const float* key_lengths,
                              bool causal, cudaStream_t s) {
  const int64_t rows = b * heads * tq;
  if (rows <= 0 || tk <= 0) return cudaSuccess;
  attention_softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(scores, heads, tq, tk, key_lengths, causal);
  return cudaGetLastError();
}

cudaError_t attention_softmax_backward(const float* p, float* ds, int64_t rows, int64_t tk, cudaStream_t s) {
  if (rows <= 0 || tk <= 0) return cudaSuccess;
  attention_softmax_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(p, ds, tk);
  return cudaGetLastError();
}

cudaError_t additive_attention_forward(const float* query, const float* keys, const float* values, const float* v,
                                       const float* lengths, const AdditiveAttentionDims& dims, float* probs,
                                       float* context, cudaStream_t s) {
  const int64_t B = dims.b, S = dims.s, A = dims.a, D = dims.d;
  if (B <= 0) return cudaSuccess;
  if (S > 0) {
    scores_kernel<<<blocks_for_warps(B * S), kThreads, 0, s>>>(query, keys, v, lengths, B, S, A, probs);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
    softmax_kernel<<<blocks_for_rows(B), kThreads, 0, s>>>(lengths, B, S, probs);
    rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
  }
  if (D > 0) {
    context_kernel<<<blocks_for(B * D), kThreads, 0, s>>>(probs, values, lengths, B, S, D, context);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

// counts [b] (int64, first: device allocations are aligned), ds [b, s], dv_part [b, a].
int64_t additive_attention_backward_workspace(const AdditiveAttentionDims& dims) {
  return 2 * dims.b + dims.b * dims.s + dims.b * dims.a;
}

cudaError_t additive_attention_backward(const float* dcontext, const float* query, const float* keys,
                                        const float* values, const float* v, const float* probs,
                                        const AdditiveAttentionDims& dims, float* workspace, float* dquery,
                                        float* dkeys, float* dvalues, float* dv, cudaStream_t s) {
  const int64_t B = dims.b, S = dims.s, A = dims.a, D = dims.d;
  auto* counts = reinterpret_cast<int64_t*>(workspace);
  float* ds = workspace + 2 * B;
  float* dv_part = ds + B * S;
  if (B > 0) {
    backward_rows_kernel<<<blocks_for_rows(B), kThreads, 0, s>>>(dcontext, values, probs, B, S, D, ds, counts, dvalues);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
    if (A > 0) {
      backward_keys_kernel<<<blocks_for(B * A), kThreads, 0, s>>>(query, keys, v, ds, counts, B, S, A, dquery, dkeys,
                                                                  dv_part);
      rc = cudaGetLastError();
      if (rc != cudaSuccess) return rc;
    }
  }
  if (A > 0) {
    // With no rows at all, dv is zeros (the sum of nothing).
    backward_dv_kernel<<<blocks_for(A), kThreads, 0, s>>>(dv_part, B, A, dv);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

}  // namespace ts::engine::cuda::kernels
