// The attention family on the CPU. Multi-head attention: oneDNN's sgemm per head, heads in
// parallel. Additive (Bahdanau) attention for one decoder step: OpenMP over the batch, the inner
// loops over the attention units (score, tanh, their gradients) vectorized with the polynomial
// tanh of fast_math.h. Its work per step is B S A tanh in forward and again in backward
// (recomputed there instead of keeping [B, S, A] per step), plus B S D for the context.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend_checks.h"
#include "engine/cpu/cpu_common.h"
#include "engine/cpu/dnnl_common.h"
#include "engine/cpu/fast_math.h"
#include "engine/cpu/gemm.h"

namespace ts::engine::cpu {

namespace {

// The per-head products run inside our parallel loop over (batch, head), each on its thread.
constexpr GemmThreads kOnThisThread = GemmThreads::calling_thread;

constexpr int64_t kAdditiveParallelThreshold = 1 << 14;  // B S A below this: one thread

void check_plain_shape(const Tensor& t, const char* op, const char* what, const Shape& shape) {
  if (!t.defined()) throw std::invalid_argument(std::string(op) + ": " + what + " is undefined");
  if (!t.device().is_cpu()) throw std::invalid_argument(std::string(op) + ": " + what + " on " + t.device().str());
  if (!t.layout().is_plain() || t.shape() != shape) {
    throw std::invalid_argument(std::string(op) + ": " + what + " must be plain " + shape_str(shape) + ", got " +
                                shape_str(t.shape()) + " " + t.layout().str());
  }
}

// v . tanh(q + k)
__attribute__((target_clones("avx2", "default"))) float score_row(int64_t A, const float* __restrict q,
                                                                  const float* __restrict k,
                                                                  const float* __restrict v) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t a = 0; a < A; ++a) s += v[a] * fast_tanh(q[a] + k[a]);
  return s;
}

// With t = tanh(q + k) and ds = d loss / d score: dk = ds v (1 - t^2) (written), dq += dk,
// dv += ds t.
__attribute__((target_clones("avx2", "default"))) void score_backward_row(
    int64_t A, float ds, const float* __restrict q, const float* __restrict k, const float* __restrict v,
    float* __restrict dk, float* __restrict dq, float* __restrict dv) {
#pragma omp simd
  for (int64_t a = 0; a < A; ++a) {
    const float t = fast_tanh(q[a] + k[a]);
    const float g = ds * v[a] * (1.0f - t * t);
    dk[a] = g;
    dq[a] += g;
    dv[a] += ds * t;
  }
}

// y += alpha x over n floats.
inline void axpy(int64_t n, float alpha, const float* __restrict x, float* __restrict y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

inline float dot(int64_t n, const float* __restrict x, const float* __restrict y) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

struct Dims {
  int64_t B, S, A, D;
};

Dims check_args(const char* op, const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& v) {
  if (!query.defined() || !keys.defined() || !values.defined() || !v.defined() || query.dim() != 2 || keys.dim() != 3 ||
      values.dim() != 3) {
    throw std::invalid_argument(std::string(op) + ": query [B, A], keys [B, S, A], values [B, S, D], v [A] expected");
  }
  const Dims d{query.size(0), keys.size(1), query.size(1), values.size(2)};
  check_plain_shape(query, op, "query", {d.B, d.A});
  check_plain_shape(keys, op, "keys", {d.B, d.S, d.A});
  check_plain_shape(values, op, "values", {d.B, d.S, d.D});
  check_plain_shape(v, op, "v", {d.A});
  return d;
}

}  // namespace

Backend::AttentionResult CpuBackend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                       const Tensor* key_lengths, int64_t heads, float scale,
                                                       bool causal) {
  check_plain(q, "attention", "q", 3);
  check_plain(k, "attention", "k", 3);
  check_plain(v, "attention", "v", 3);
  const checks::AttentionDims dims = checks::attention_dims(q, k, v, heads);
  const int64_t b = dims.b, tq = dims.tq, hd = dims.hd, tk = dims.tk;
  const float* lengths = nullptr;
  if (key_lengths && key_lengths->defined()) {
    check_plain(*key_lengths, "attention", "key_lengths", 1);
    checks::check_key_lengths(*key_lengths, b);
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
    sgemm(GemmSite::attention_forward, 'N', 'T', tq, tk, dh, scale, pq + n * tq * hd + h * dh, hd,
          pk + n * tk * hd + h * dh, hd, 0.0f, p, tk, kOnThisThread);
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
    sgemm(GemmSite::attention_forward, 'N', 'N', tq, dh, tk, 1.0f, p, tk, pv + n * tk * hd + h * dh, hd, 0.0f,
          po + n * tq * hd + h * dh, hd, kOnThisThread);
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
      sgemm(GemmSite::attention_backward, 'T', 'N', tk, dh, tq, 1.0f, p, tk, pdo + qo, hd, 0.0f, dv + ko, hd,
            kOnThisThread);  // dV = P^T dO
      sgemm(GemmSite::attention_backward, 'N', 'T', tq, tk, dh, 1.0f, pdo + qo, hd, pv + ko, hd, 0.0f, ds.data(), tk,
            kOnThisThread);               // dP = dO V^T
      for (int64_t i = 0; i < tq; ++i) {  // dS = P (dP - rowsum(P dP)); hidden keys have P = 0
        const float* prow = p + i * tk;
        float* row = ds.data() + i * tk;
        double dot = 0;
        for (int64_t j = 0; j < tk; ++j) dot += static_cast<double>(prow[j]) * row[j];
        for (int64_t j = 0; j < tk; ++j) row[j] = prow[j] * (row[j] - static_cast<float>(dot));
      }
      sgemm(GemmSite::attention_backward, 'N', 'N', tq, dh, tk, scale, ds.data(), tk, pk + ko, hd, 0.0f, dq + qo, hd,
            kOnThisThread);  // dQ = s dS K
      sgemm(GemmSite::attention_backward, 'T', 'N', tk, dh, tq, scale, ds.data(), tk, pq + qo, hd, 0.0f, dk + ko, hd,
            kOnThisThread);  // dK = s dS^T Q
    }
  }
  return r;
}

Backend::AdditiveAttentionResult CpuBackend::additive_attention_forward(const Tensor& query, const Tensor& keys,
                                                                        const Tensor& values, const Tensor& v,
                                                                        const Tensor* lengths) {
  const char* op = "additive_attention";
  const Dims d = check_args(op, query, keys, values, v);
  std::vector<int64_t> len(static_cast<size_t>(d.B), d.S);
  if (lengths && lengths->defined()) {
    check_plain_shape(*lengths, op, "lengths", {d.B});
    const float* p = lengths->data();
    for (int64_t b = 0; b < d.B; ++b) {
      if (!(p[b] >= 0.0f && p[b] <= static_cast<float>(d.S)) || p[b] != std::floor(p[b])) {
        throw std::invalid_argument(std::string(op) + ": lengths[" + std::to_string(b) + "] = " + std::to_string(p[b]) +
                                    " is not an integer in [0, " + std::to_string(d.S) + "]");
      }
      len[static_cast<size_t>(b)] = static_cast<int64_t>(p[b]);
    }
  }
  AdditiveAttentionResult r{Tensor::empty({d.B, d.D}, query.device()), Tensor::empty({d.B, d.S}, query.device())};
  const float *pq = query.data(), *pk = keys.data(), *pvals = values.data(), *pv = v.data();
  float *pc = r.context.data(), *pp = r.probs.data();
#pragma omp parallel for schedule(static) if (d.B * d.S * d.A > kAdditiveParallelThreshold)
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t n = len[static_cast<size_t>(b)];
    float* p = pp + b * d.S;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      p[j] = score_row(d.A, pq + b * d.A, pk + (b * d.S + j) * d.A, pv);
      mx = std::max(mx, p[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      p[j] = std::exp(p[j] - mx);
      sum += p[j];
    }
    const float inv = n > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
    for (int64_t j = 0; j < n; ++j) p[j] *= inv;
    std::fill(p + n, p + d.S, 0.0f);
    float* c = pc + b * d.D;
    std::fill(c, c + d.D, 0.0f);
    for (int64_t j = 0; j < n; ++j) axpy(d.D, p[j], pvals + (b * d.S + j) * d.D, c);
  }
  return r;
}

Backend::AdditiveAttentionGrads CpuBackend::additive_attention_backward(const Tensor& dcontext, const Tensor& query,
                                                                        const Tensor& keys, const Tensor& values,
                                                                        const Tensor& v, const Tensor& probs) {
  const char* op = "additive_attention_backward";
  const Dims d = check_args(op, query, keys, values, v);
  check_plain_shape(dcontext, op, "dcontext", {d.B, d.D});
  check_plain_shape(probs, op, "probs", {d.B, d.S});
  AdditiveAttentionGrads g{Tensor::empty({d.B, d.A}, query.device()), Tensor::empty({d.B, d.S, d.A}, query.device()),
                           Tensor::empty({d.B, d.S, d.D}, query.device()), Tensor::empty({d.A}, query.device())};
  const float *pdc = dcontext.data(), *pq = query.data(), *pk = keys.data(), *pvals = values.data(), *pv = v.data(),
              *pp = probs.data();
  float *dq = g.dquery.data(), *dk = g.dkeys.data(), *dvals = g.dvalues.data(), *dv = g.dv.data();
  // dv sums over the whole batch: one partial sum per thread, added in thread order afterwards,
  // so that a given thread count always gives the same bits.
  const bool parallel = d.B * d.S * d.A > kAdditiveParallelThreshold;
  const int threads = parallel ? omp_get_max_threads() : 1;
  std::vector<float> dv_parts(static_cast<size_t>(threads * d.A), 0.0f);
#pragma omp parallel num_threads(threads) if (parallel)
  {
    float* dv_local = dv_parts.data() + omp_get_thread_num() * d.A;
    std::vector<float> ds(static_cast<size_t>(d.S));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < d.B; ++b) {
      const float* p = pp + b * d.S;
      const float* dc = pdc + b * d.D;
      // Keys past the length have p = 0, and so no score or value gradient.
      int64_t n = d.S;
      while (n > 0 && p[n - 1] == 0.0f) --n;
      // d p_j = dc . values_j; d score_j = p_j (d p_j - sum_k p_k d p_k) (the softmax's Jacobian).
      double weighted = 0;
      for (int64_t j = 0; j < n; ++j) {
        ds[static_cast<size_t>(j)] = dot(d.D, dc, pvals + (b * d.S + j) * d.D);
        weighted += static_cast<double>(p[j]) * ds[static_cast<size_t>(j)];
      }
      float* dqb = dq + b * d.A;
      std::fill(dqb, dqb + d.A, 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float dsj = p[j] * (ds[static_cast<size_t>(j)] - static_cast<float>(weighted));
        score_backward_row(d.A, dsj, pq + b * d.A, pk + (b * d.S + j) * d.A, pv, dk + (b * d.S + j) * d.A, dqb,
                           dv_local);
        float* dvj = dvals + (b * d.S + j) * d.D;
        for (int64_t k = 0; k < d.D; ++k) dvj[k] = p[j] * dc[k];
      }
      std::fill(dk + (b * d.S + n) * d.A, dk + (b + 1) * d.S * d.A, 0.0f);
      std::fill(dvals + (b * d.S + n) * d.D, dvals + (b + 1) * d.S * d.D, 0.0f);
    }
  }
  std::fill(dv, dv + d.A, 0.0f);
  for (int t = 0; t < threads; ++t) axpy(d.A, 1.0f, dv_parts.data() + t * d.A, dv);
  return g;
}

}  // namespace ts::engine::cpu
