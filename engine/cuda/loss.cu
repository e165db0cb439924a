// The loss family's kernels: softmax cross-entropy, label-smoothed cross-entropy, smooth-L1 and
// the gradient-norm penalty; sums in double, in a fixed order.
#include <cfloat>
#include <cmath>

#include "engine/cuda/block_reduce.cuh"
#include "engine/cuda/kernel_grid.cuh"
#include "engine/cuda/loss_kernels.h"

namespace ts::engine::cuda::kernels {

namespace {

__global__ void softmax_xent_forward_kernel(const float* logits, const float* labels, int64_t k, float* probs,
                                            float* row_loss) {
  __shared__ float fshared[kThreads];
  __shared__ double dshared[kThreads];
  const int64_t row = blockIdx.x;
  const float* z = logits + row * k;
  float* p = probs + row * k;
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) m = fmaxf(m, z[j]);
  m = block_reduce(m, MaxOp{}, fshared);
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    const float e = expf(z[j] - m);
    p[j] = e;
    s += e;
  }
  s = block_reduce(s, SumOp{}, dshared);
  const float inv = static_cast<float>(1.0 / s);
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) p[j] *= inv;
  if (threadIdx.x == 0) {
    int64_t c = static_cast<int64_t>(labels[row]);
    if (c < 0 || c >= k) c = 0;  // validated on the host; never read out of bounds regardless
    row_loss[row] = static_cast<float>(log(s) + static_cast<double>(m) - static_cast<double>(z[c]));
  }
}

__global__ void softmax_xent_backward_kernel(const float* dloss, const float* probs, const float* labels, int64_t n,
                                             int64_t k, float* dx) {
  const float g = dloss[0] / static_cast<float>(n > 0 ? n : 1);
  const int64_t total = n * k;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t row = i / k, j = i % k;
    const float v = g * probs[i];
    dx[i] = j == static_cast<int64_t>(labels[row]) ? v - g : v;
  }
}

__global__ void norm_rows_kernel(const float* x, int64_t d, float target, float* norms, double* terms) {
  __shared__ double shared[kThreads];
  const int64_t row = blockIdx.x;
  const float* p = x + row * d;
  double ss = 0.0;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) ss += static_cast<double>(p[k]) * p[k];
  ss = block_sum(ss, shared);
  if (threadIdx.x == 0) {
    const double norm = sqrt(ss);
    norms[row] = static_cast<float>(norm);
    terms[row] = (norm - target) * (norm - target);
  }
}

__global__ void norm_penalty_backward_kernel(const float* dloss, const float* x, const float* norms, int64_t n,
                                             int64_t d, float target, float* dx) {
  const float g = dloss[0];
  const int64_t total = n * d;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const float nm = norms[i / d];
    // The norm's gradient is undefined at 0; 0 there, as on the CPU and in PyTorch.
    const float coef = nm > 0.0f ? g * 2.0f * (nm - target) / (static_cast<float>(n) * nm) : 0.0f;
    dx[i] = coef * x[i];
  }
}

__global__ void smooth_l1_partials_kernel(const float* x, const float* t, const float* w, int64_t n, double beta,
                                          double* partials) {
  __shared__ double shared[kThreads];
  const double half_beta = 0.5 * beta;
  double acc = 0.0;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const double d = fabs(static_cast<double>(x[i]) - t[i]);
    const double l = d < beta ? 0.5 * d * d / beta : d - half_beta;
    acc += w ? w[i] * l : l;
  }
  const double total = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void smooth_l1_backward_kernel(const float* dloss, const float* x, const float* t, const float* w, int64_t n,
                                          float beta, float scale, float* dx) {
  const float g = dloss[0] * scale;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float d = x[i] - t[i];
    const float dl = fabsf(d) < beta ? d / beta : static_cast<float>((d > 0.0f) - (d < 0.0f));
    dx[i] = g * (w ? w[i] : 1.0f) * dl;
  }
}

__global__ void label_smoothed_ce_forward_kernel(const float* logits, const float* labels, int64_t vocab, float eps,
                                                 int64_t ignore_index, float* lse, double* terms) {
  __shared__ float fshared[kThreads];
  __shared__ double dshared[kThreads];
  const int64_t i = blockIdx.x;
  const auto y = static_cast<int64_t>(labels[i]);
  if (y == ignore_index) {
    if (threadIdx.x == 0) {
      lse[i] = 0.0f;
      terms[i] = 0.0;
    }
    return;  // the whole block takes this branch
  }
  const float* row = logits + i * vocab;
  float mx = -INFINITY;
  for (int64_t k = threadIdx.x; k < vocab; k += blockDim.x) mx = fmaxf(mx, row[k]);
  mx = block_max(mx, fshared);
  double s = 0, sum_x = 0;
  for (int64_t k = threadIdx.x; k < vocab; k += blockDim.x) {
    s += exp(static_cast<double>(row[k] - mx));
    sum_x += row[k];
  }
  s = block_sum(s, dshared);
  sum_x = block_sum(sum_x, dshared);
  if (threadIdx.x == 0) {
    const double l = mx + log(s);
    lse[i] = static_cast<float>(l);
    terms[i] = (1.0 - eps) * (l - row[y]) + eps * (l - sum_x / static_cast<double>(vocab));
  }
}

__global__ void label_smoothed_ce_backward_kernel(const float* dloss, const float* logits, const float* lse,
                                                  const float* labels, int64_t n, int64_t vocab, float eps,
                                                  int64_t ignore_index, float normalizer, float* dx) {
  const float g = dloss[0] / normalizer;
  const float off = eps / static_cast<float>(vocab);
  const int64_t total = n * vocab;
  for (int64_t idx = global_index(); idx < total; idx += grid_stride()) {
    const int64_t i = idx / vocab, k = idx % vocab;
    const auto y = static_cast<int64_t>(labels[i]);
    if (y == ignore_index) {
      dx[idx] = 0.0f;
      continue;
    }
    float v = g * (expf(logits[idx] - lse[i]) - off);
    if (k == y) v -= g * (1.0f - eps);
    dx[idx] = v;
  }
}

}  // namespace

cudaError_t softmax_xent_forward(const float* logits, const float* labels, int64_t n, int64_t k, float* probs,
                                 float* row_loss, cudaStream_t s) {
  if (n <= 0 || k <= 0) return cudaSuccess;
  softmax_xent_forward_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(logits, labels, k, probs, row_loss);
  return cudaGetLastError();
}

cudaError_t softmax_xent_backward(const float* dloss, const float* probs, const float* labels, int64_t n, int64_t k,
                                  float* dx, cudaStream_t s) {
  const int64_t total = n * k;
  if (total <= 0) return cudaSuccess;
  softmax_xent_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dloss, probs, labels, n, k, dx);
  return cudaGetLastError();
}

cudaError_t norm_penalty_forward(const float* x, int64_t n, int64_t d, float target, float* norms, double* terms,
                                 float* loss, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  norm_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(x, d, target, norms, terms);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  finish_sum(terms, n, 1.0, static_cast<double>(n), loss, s);
  return cudaGetLastError();
}

cudaError_t norm_penalty_backward(const float* dloss, const float* x, const float* norms, int64_t n, int64_t d,
                                  float target, float* dx, cudaStream_t s) {
  const int64_t total = n * d;
  if (total <= 0) return cudaSuccess;
  norm_penalty_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dloss, x, norms, n, d, target, dx);
  return cudaGetLastError();
}

cudaError_t smooth_l1_forward(const float* x, const float* t, const float* w, int64_t n, float beta, float scale,
                              double* partials, float* out, cudaStream_t s) {
  const int blocks = sum_blocks(n);
  smooth_l1_partials_kernel<<<blocks, kThreads, 0, s>>>(x, t, w, n < 0 ? 0 : n, static_cast<double>(beta), partials);
  cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  finish_sum(partials, blocks, static_cast<double>(scale), 0.0, out, s);
  return cudaGetLastError();
}

cudaError_t smooth_l1_backward(const float* dloss, const float* x, const float* t, const float* w, int64_t n,
                               float beta, float scale, float* dx, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  smooth_l1_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(dloss, x, t, w, n, beta, scale, dx);
  return cudaGetLastError();
}

cudaError_t label_smoothed_ce_forward(const float* logits, const float* labels, int64_t n, int64_t vocab, float eps,
                                      int64_t ignore_index, float normalizer, float* lse, double* terms, float* loss,
                                      cudaStream_t s) {
  if (n > 0) {
    label_smoothed_ce_forward_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(logits, labels, vocab, eps,
                                                                                   ignore_index, lse, terms);
    const cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess) return rc;
  }
  finish_sum(terms, n, 1.0, static_cast<double>(normalizer), loss, s);
  return cudaGetLastError();
}

cudaError_t label_smoothed_ce_backward(const float* dloss, const float* logits, const float* lse, const float* labels,
                                       int64_t n, int64_t vocab, float eps, int64_t ignore_index, float normalizer,
                                       float* dx, cudaStream_t s) {
  const int64_t total = n * vocab;
  if (total <= 0) return cudaSuccess;
  label_smoothed_ce_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dloss, logits, lse, labels, n, vocab, eps,
                                                                           ignore_index, normalizer, dx);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
