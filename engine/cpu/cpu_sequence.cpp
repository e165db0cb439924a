// The sequence models' kernels on the CPU: layer norm and multi-head attention (oneDNN's sgemm
// per head, heads in parallel). GELU and dropout: cpu/pointwise.cpp; label-smoothed
// cross-entropy: cpu/loss.cpp; the sum of squares: cpu/reduce.cpp.
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/fast_math.h"

namespace ts::engine::cpu {

namespace {

// Row-major C = alpha op(A) op(B) + beta C through oneDNN's sgemm. Called inside our own
// parallel loops, where oneDNN runs it on the calling thread.
void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  if (dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) != dnnl_success) {
    throw std::runtime_error("dnnl_sgemm failed (" + std::to_string(m) + "x" + std::to_string(n) + "x" +
                             std::to_string(k) + ")");
  }
}

}  // namespace

// ---------------------------------------------------------------- layer norm

// ---------------------------------------------------------------- attention

Backend::AttentionResult CpuBackend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                       const Tensor* key_lengths, int64_t heads, float scale,
                                                       bool causal) {
  check_plain(q, "attention", "q", 3);
  check_plain(k, "attention", "k", 3);
  check_plain(v, "attention", "v", 3);
  const int64_t b = q.size(0), tq = q.size(1), hd = q.size(2), tk = k.size(1);
  if (heads < 1 || hd % heads != 0 || k.size(0) != b || v.shape() != k.shape() || k.size(2) != hd) {
    throw std::invalid_argument("attention: q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " +
                                shape_str(v.shape()) + " with " + std::to_string(heads) + " heads");
  }
  const float* lengths = nullptr;
  if (key_lengths && key_lengths->defined()) {
    check_plain(*key_lengths, "attention", "key_lengths", 1);
    if (key_lengths->size(0) != b) throw std::invalid_argument("attention: key_lengths must be [B]");
    lengths = key_lengths->data();
  }
  const int64_t dh = hd / heads;
  AttentionResult r{Tensor::empty({b, tq, hd}, q.device()), Tensor::empty({b, heads, tq, tk}, q.device())};
  const float *pq = q.data(), *pk = k.data(), *pv = v.data();
  float *po = r.out.data(), *pp = r.probs.data();
#pragma omp parallel for schedule(dynamic) if (b * heads > 1)
  for (int64_t bh = 0; bh < b * heads; ++bh) {
    const int64_t n = bh / heads, h = bh % heads;
    float* p = pp + bh * tq * tk;
    gemm('N', 'T', tq, tk, dh, scale, pq + n * tq * hd + h * dh, hd, pk + n * tk * hd + h * dh, hd, 0.0f, p, tk);
    const int64_t len = lengths ? std::clamp<int64_t>(static_cast<int64_t>(lengths[n]), 0, tk) : tk;
    for (int64_t i = 0; i < tq; ++i) {
      float* row = p + i * tk;
      const int64_t valid = causal ? std::min(len, i + 1) : len;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < valid; ++j) mx = std::max(mx, row[j]);
      double sum = 0;
      for (int64_t j = 0; j < valid; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const float inv = valid > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
      for (int64_t j = 0; j < valid; ++j) row[j] *= inv;
      for (int64_t j = valid; j < tk; ++j) row[j] = 0.0f;
    }
    gemm('N', 'N', tq, dh, tk, 1.0f, p, tk, pv + n * tk * hd + h * dh, hd, 0.0f, po + n * tq * hd + h * dh, hd);
  }
  return r;
}

Backend::AttentionGrads CpuBackend::attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                                       const Tensor& v, const Tensor& probs, int64_t heads,
                                                       float scale) {
  check_plain(dout, "attention_backward", "dout", 3);
  check_plain(probs, "attention_backward", "probs", 4);
  if (dout.shape() != q.shape()) throw std::invalid_argument("attention_backward: dout and q shapes differ");
  const int64_t b = q.size(0), tq = q.size(1), hd = q.size(2), tk = k.size(1), dh = hd / heads;
  AttentionGrads r{Tensor::empty(q.shape(), q.device()), Tensor::empty(k.shape(), k.device()),
                   Tensor::empty(v.shape(), v.device())};
  const float *pdo = dout.data(), *pq = q.data(), *pk = k.data(), *pv = v.data(), *pp = probs.data();
  float *dq = r.dq.data(), *dk = r.dk.data(), *dv = r.dv.data();
#pragma omp parallel if (b * heads > 1)
  {
    std::vector<float> ds(static_cast<size_t>(tq * tk));
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < b * heads; ++bh) {
      const int64_t n = bh / heads, h = bh % heads;
      const float* p = pp + bh * tq * tk;
      const int64_t qo = n * tq * hd + h * dh, ko = n * tk * hd + h * dh;
      gemm('T', 'N', tk, dh, tq, 1.0f, p, tk, pdo + qo, hd, 0.0f, dv + ko, hd);              // dV = P^T dO
      gemm('N', 'T', tq, tk, dh, 1.0f, pdo + qo, hd, pv + ko, hd, 0.0f, ds.data(), tk);      // dP = dO V^T
      for (int64_t i = 0; i < tq; ++i) {   // dS = P (dP - rowsum(P dP)); hidden keys have P = 0
        const float* prow = p + i * tk;
        float* row = ds.data() + i * tk;
        double dot = 0;
        for (int64_t j = 0; j < tk; ++j) dot += static_cast<double>(prow[j]) * row[j];
        for (int64_t j = 0; j < tk; ++j) row[j] = prow[j] * (row[j] - static_cast<float>(dot));
      }
      gemm('N', 'N', tq, dh, tk, scale, ds.data(), tk, pk + ko, hd, 0.0f, dq + qo, hd);      // dQ = s dS K
      gemm('T', 'N', tk, dh, tq, scale, ds.data(), tk, pq + qo, hd, 0.0f, dk + ko, hd);      // dK = s dS^T Q
    }
  }
  return r;
}

}  // namespace ts::engine::cpu
