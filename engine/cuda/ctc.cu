// The ctc family's kernel: the CTC loss, one block per sample, written in the CPU backend's
// (cpu/ctc.cpp) order of operations and precision (double), with its log-space sums from
// numerics/ctc.h, so that both backends agree to a few ulps.
#include <cfloat>
#include <cmath>

#include "engine/cuda/block_reduce.cuh"
#include "engine/cuda/ctc_kernels.h"
#include "engine/cuda/kernel_grid.cuh"
#include "engine/numerics/ctc.h"

namespace ts::engine::cuda::kernels {

namespace {

using numerics::log_add;
using numerics::log_add3;

// One block per sample: log-softmax (a thread per frame), the alpha recursion (threads over
// states, a barrier per frame), then beta backwards with each frame's gradient written as
// soon as its beta row is known, as the CPU backend does.
__global__ void ctc_kernel(CtcArgs a) {
  __shared__ double s_nll;
  const int64_t i = blockIdx.x;
  const int64_t T = a.frames[i], L = a.lengths[i], S = 2 * L + 1, K = a.k;
  const int64_t stride = a.n * K;
  const float* z = a.logits + i * K;
  const int64_t* lab = a.labels + a.offsets[i];
  double* lp = a.lp + i * a.t_max * K;
  double* alpha = a.alpha + i * a.t_max * a.s_max;
  const double weight = a.weights[i];
  const int64_t blank = a.blank;
  auto ext = [&](int64_t q) { return (q % 2 == 0) ? blank : lab[(q - 1) / 2]; };
  auto skip = [&](int64_t q) { return q % 2 == 1 && q >= 3 && lab[(q - 1) / 2] != lab[(q - 3) / 2]; };
  auto lo = [&](int64_t t) {
    const int64_t v = S - 2 * (T - t);
    return v > 0 ? v : int64_t{0};
  };
  auto hi = [&](int64_t t) {
    const int64_t v = 2 * t + 2;
    return v < S ? v : S;
  };

  if (T == 0) {
    if (threadIdx.x == 0) s_nll = L == 0 ? 0.0 : INFINITY;
    __syncthreads();
  } else {
    for (int64_t t = threadIdx.x; t < T; t += blockDim.x) {
      const float* zt = z + t * stride;
      double* o = lp + t * K;
      float m = zt[0];
      for (int64_t k = 1; k < K; ++k) m = fmaxf(m, zt[k]);
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += exp(static_cast<double>(zt[k]) - m);
      const double lse = static_cast<double>(m) + log(sum);
      for (int64_t k = 0; k < K; ++k) o[k] = static_cast<double>(zt[k]) - lse;
    }
    for (int64_t idx = threadIdx.x; idx < T * S; idx += blockDim.x) alpha[idx] = -INFINITY;
    __syncthreads();
    for (int64_t q = lo(0) + threadIdx.x; q < hi(0); q += blockDim.x) alpha[q] = lp[ext(q)];
    __syncthreads();
    for (int64_t t = 1; t < T; ++t) {
      for (int64_t q = lo(t) + threadIdx.x; q < hi(t); q += blockDim.x) {
        const double* prev = alpha + (t - 1) * S;
        const double a0 = prev[q];
        const double a1 = q >= 1 ? prev[q - 1] : -INFINITY;
        const double a2 = skip(q) ? prev[q - 2] : -INFINITY;
        alpha[t * S + q] = log_add3(a0, a1, a2) + lp[t * K + ext(q)];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const double* last = alpha + (T - 1) * S;
      const double log_p = S > 1 ? log_add(last[S - 1], last[S - 2]) : last[0];
      s_nll = -log_p;
    }
    __syncthreads();
  }
  const double nll = s_nll;
  // No alignment: +inf. A NaN (from NaN logits) is not infeasible: zero_infinity keeps it (as the CPU).
  const bool infeasible = isinf(nll);

  if (a.grad != nullptr && T > 0) {
    float* g = a.grad + i * K;
    if (infeasible) {
      // No alignment, no occupancy: zero_infinity zeroes the gradient, otherwise NaN (PyTorch's).
      const float fill = a.zero_infinity ? 0.0f : __int_as_float(0x7fc00000);
      for (int64_t idx = threadIdx.x; idx < T * K; idx += blockDim.x) g[(idx / K) * stride + idx % K] = fill;
    } else {
      double* cur = a.beta + i * 2 * a.s_max;
      double* next = cur + a.s_max;
      for (int64_t t = T - 1; t >= 0; --t) {
        for (int64_t q = threadIdx.x; q < S; q += blockDim.x) {
          if (q >= lo(t) && q < hi(t)) {
            double b;
            if (t == T - 1) {
              b = q >= S - 2 ? 0.0 : -INFINITY;
            } else {
              const double b0 = next[q];
              const double b1 = q + 1 < S ? next[q + 1] : -INFINITY;
              const double b2 = (q + 2 < S && skip(q + 2)) ? next[q + 2] : -INFINITY;
              b = log_add3(b0, b1, b2);
            }
            cur[q] = b + lp[t * K + ext(q)];
          } else {
            cur[q] = -INFINITY;
          }
        }
        __syncthreads();
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
          double occ = -INFINITY;
          for (int64_t q = lo(t); q < hi(t); ++q) {
            if (ext(q) == k) occ = log_add(occ, alpha[t * S + q] + cur[q]);
          }
          const double lpk = lp[t * K + k];
          const double y = exp(lpk);
          const double gamma = exp(occ + nll - lpk);
          g[t * stride + k] = static_cast<float>(weight * (y - gamma));
        }
        __syncthreads();
        double* tmp = cur;
        cur = next;
        next = tmp;
      }
    }
  }
  if (threadIdx.x == 0) {
    const double v = (infeasible && a.zero_infinity) ? 0.0 : nll;
    a.nll[i] = static_cast<float>(v);
    a.contrib[i] = weight * v;
  }
}

// The loss: contributions added in sample order, as on the CPU (the same result every run).
__global__ void ctc_finish_kernel(const double* contrib, int64_t n, float* loss) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += contrib[i];
  loss[0] = static_cast<float>(total);
}

}  // namespace

// ------------------------------------------------------------------ launchers

cudaError_t ctc_loss(const CtcArgs& a, cudaStream_t s) {
  if (a.n <= 0) {
    ctc_finish_kernel<<<1, 1, 0, s>>>(a.contrib, 0, a.loss);
    return cudaGetLastError();
  }
  ctc_kernel<<<static_cast<unsigned>(a.n), kThreads, 0, s>>>(a);
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) return rc;
  ctc_finish_kernel<<<1, 1, 0, s>>>(a.contrib, a.n, a.loss);
  return cudaGetLastError();
}

}  // namespace ts::engine::cuda::kernels
