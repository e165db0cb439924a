// The attention family on the GPU (kernels in attention.cu). Multi-head attention: batched cuBLAS
// GEMMs and our softmax kernels. Additive (Bahdanau) attention for one decoder step: arguments are
// checked as the CPU backend checks them (cpu/attention.cpp), with its messages: the lengths are
// read on the host for that (B floats; the copy waits for the work queued before it), so a bad
// length is the CPU's std::invalid_argument, never a kernel reading past a row. The kernels then
// read the lengths on the device.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend_checks.h"
#include "engine/cuda/attention_kernels.h"
#include "engine/cuda/cuda_common.h"
#include "engine/cuda/device_memory.h"

namespace ts::engine::cuda {

namespace {

// Host pointers uploaded once as a device array (cuBLAS's batched GEMMs take arrays of
// device pointers).
class PointerArrays {
 public:
  PointerArrays(const std::vector<const float*>& host, int device) {
    buffer_ = workspace_tensor(static_cast<int64_t>(host.size() * sizeof(void*)), device);
    copy_to_device(buffer_.data(), host.data(), host.size() * sizeof(void*), device);
  }
  // The `index`-th array of `count` pointers.
  const float* const* in(size_t index, size_t count) const {
    return reinterpret_cast<const float* const*>(buffer_.data()) + index * count;
  }
  float* const* out(size_t index, size_t count) const {
    return reinterpret_cast<float* const*>(buffer_.data()) + index * count;
  }

 private:
  Tensor buffer_;
};

// Row-major C = alpha op(A) op(B) + 0 C for `count` matrices at once: cuBLAS is column-major,
// and a row-major matrix is its transpose, so C^T = op(B)^T op(A)^T is computed.
void gemm_batched(Env& env, char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* const* a,
                  int64_t lda, const float* const* b, int64_t ldb, float* const* c, int64_t ldc, int64_t count,
                  const char* op) {
  const float zero = 0.0f;
  auto flag = [](char t) { return t == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N; };
  std::lock_guard<std::mutex> lock(env.ctx.library_mutex());
  TS_CUBLAS_CHECK(cublasSgemmBatched(env.ctx.cublas(), flag(tb), flag(ta), to_int(n, op, "columns"),
                                     to_int(m, op, "rows"), to_int(k, op, "inner size"), &alpha, b,
                                     to_int(ldb, op, "leading dimension"), a, to_int(lda, op, "leading dimension"),
                                     &zero, c, to_int(ldc, op, "leading dimension"), to_int(count, op, "batch")));
}

// Defined, on this device, plain and exactly `shape`.
void check_plain_shape(const Tensor& t, int device, const char* op, const char* what, const Shape& shape) {
  check_on(t, device, op, what);
  if (!t.layout().is_plain() || t.shape() != shape) {
    throw std::invalid_argument(std::string(op) + ": " + what + " must be plain " + shape_str(shape) + ", got " +
                                shape_str(t.shape()) + " " + t.layout().str());
  }
}

kernels::AdditiveAttentionDims check_args(const char* op, const Tensor& query, const Tensor& keys, const Tensor& values,
                                          const Tensor& v, int device) {
  if (!query.defined() || !keys.defined() || !values.defined() || !v.defined() || query.dim() != 2 || keys.dim() != 3 ||
      values.dim() != 3) {
    throw std::invalid_argument(std::string(op) + ": query [B, A], keys [B, S, A], values [B, S, D], v [A] expected");
  }
  kernels::AdditiveAttentionDims d;
  d.b = query.size(0);
  d.s = keys.size(1);
  d.a = query.size(1);
  d.d = values.size(2);
  check_plain_shape(query, device, op, "query", {d.b, d.a});
  check_plain_shape(keys, device, op, "keys", {d.b, d.s, d.a});
  check_plain_shape(values, device, op, "values", {d.b, d.s, d.d});
  check_plain_shape(v, device, op, "v", {d.a});
  return d;
}

}  // namespace

Backend::AttentionResult CudaBackend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                        const Tensor* key_lengths, int64_t heads, float scale,
                                                        bool causal) {
  const char* op = "attention";
  check_plain(q, device_, op, "q", 3);
  check_plain(k, device_, op, "k", 3);
  check_plain(v, device_, op, "v", 3);
  const checks::AttentionDims dims = checks::attention_dims(q, k, v, heads);
  const int64_t b = dims.b, tq = dims.tq, hd = dims.hd, tk = dims.tk;
  const float* lengths = nullptr;
  if (key_lengths && key_lengths->defined()) {
    check_plain(*key_lengths, device_, op, "key_lengths", 1);
    checks::check_key_lengths(*key_lengths, b);
    lengths = key_lengths->data();
  }
  const int64_t dh = hd / heads, bh_count = b * heads;
  Env env(*impl_);
  AttentionResult r{Tensor::empty({b, tq, hd}, q.device()), Tensor::empty({b, heads, tq, tk}, q.device())};
  if (r.out.numel() == 0) return r;
  if (tk == 0 || dh == 0) {
    TS_CUDA_CHECK(kernels::fill(r.out.data(), r.out.numel(), 0.0f, env.stream));
    return r;
  }
  const auto count = static_cast<size_t>(bh_count);
  std::vector<const float*> host(5 * count);  // q_h, k_h, p, v_h, out_h
  for (int64_t bh = 0; bh < bh_count; ++bh) {
    const int64_t n = bh / heads, h = bh % heads;
    const size_t i = static_cast<size_t>(bh);
    host[i] = q.data() + n * tq * hd + h * dh;
    host[count + i] = k.data() + n * tk * hd + h * dh;
    host[2 * count + i] = r.probs.data() + bh * tq * tk;
    host[3 * count + i] = v.data() + n * tk * hd + h * dh;
    host[4 * count + i] = r.out.data() + n * tq * hd + h * dh;
  }
  PointerArrays ptr(host, device_);
  gemm_batched(env, 'N', 'T', tq, tk, dh, scale, ptr.in(0, count), hd, ptr.in(1, count), hd, ptr.out(2, count), tk,
               bh_count, op);
  TS_CUDA_CHECK(kernels::attention_softmax(r.probs.data(), b, heads, tq, tk, lengths, causal, env.stream));
  gemm_batched(env, 'N', 'N', tq, dh, tk, 1.0f, ptr.in(2, count), tk, ptr.in(3, count), hd, ptr.out(4, count), hd,
               bh_count, op);
  return r;
}

Backend::AttentionGrads CudaBackend::attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                                        const Tensor& v, const Tensor& probs, int64_t heads,
                                                        float scale) {
  const char* op = "attention_backward";
  check_plain(dout, device_, op, "dout", 3);
  check_plain(probs, device_, op, "probs", 4);
  check_plain(q, device_, op, "q", 3);
  check_plain(k, device_, op, "k", 3);
  check_plain(v, device_, op, "v", 3);
  if (dout.shape() != q.shape()) throw std::invalid_argument("attention_backward: dout and q shapes differ");
  const int64_t b = q.size(0), tq = q.size(1), hd = q.size(2), tk = k.size(1);
  if (heads < 1 || hd % heads != 0 || probs.shape() != Shape{b, heads, tq, tk}) {
    throw std::invalid_argument("attention_backward: probs " + shape_str(probs.shape()) + " for q " +
                                shape_str(q.shape()) + ", k " + shape_str(k.shape()) + " with " +
                                std::to_string(heads) + " heads");
  }
  const int64_t dh = hd / heads, bh_count = b * heads;
  Env env(*impl_);
  AttentionGrads r{Tensor::empty(q.shape(), q.device()), Tensor::empty(k.shape(), k.device()),
                   Tensor::empty(v.shape(), v.device())};
  if (bh_count == 0 || dh == 0) return r;
  if (tq == 0 || tk == 0) {
    // No scores: every gradient is zero.
    for (Tensor* t : {&r.dq, &r.dk, &r.dv}) TS_CUDA_CHECK(kernels::fill(t->data(), t->numel(), 0.0f, env.stream));
    return r;
  }
  Tensor ds = workspace_tensor(bh_count * tq * tk * static_cast<int64_t>(sizeof(float)), device_);
  const auto count = static_cast<size_t>(bh_count);
  // p, dout_h, dv_h, ds, v_h, k_h, dq_h, q_h, dk_h
  std::vector<const float*> host(9 * count);
  for (int64_t bh = 0; bh < bh_count; ++bh) {
    const int64_t n = bh / heads, h = bh % heads;
    const int64_t qo = n * tq * hd + h * dh, ko = n * tk * hd + h * dh;
    const size_t i = static_cast<size_t>(bh);
    host[i] = probs.data() + bh * tq * tk;
    host[count + i] = dout.data() + qo;
    host[2 * count + i] = r.dv.data() + ko;
    host[3 * count + i] = ds.data() + bh * tq * tk;
    host[4 * count + i] = v.data() + ko;
    host[5 * count + i] = k.data() + ko;
    host[6 * count + i] = r.dq.data() + qo;
    host[7 * count + i] = q.data() + qo;
    host[8 * count + i] = r.dk.data() + ko;
  }
  PointerArrays ptr(host, device_);
  // dV = P^T dO; dP = dO V^T; dS = P (dP - rowsum(P dP)); dQ = s dS K; dK = s dS^T Q.
  gemm_batched(env, 'T', 'N', tk, dh, tq, 1.0f, ptr.in(0, count), tk, ptr.in(1, count), hd, ptr.out(2, count), hd,
               bh_count, op);
  gemm_batched(env, 'N', 'T', tq, tk, dh, 1.0f, ptr.in(1, count), hd, ptr.in(4, count), hd, ptr.out(3, count), tk,
               bh_count, op);
  TS_CUDA_CHECK(kernels::attention_softmax_backward(probs.data(), ds.data(), bh_count * tq, tk, env.stream));
  gemm_batched(env, 'N', 'N', tq, dh, tk, scale, ptr.in(3, count), tk, ptr.in(5, count), hd, ptr.out(6, count), hd,
               bh_count, op);
  gemm_batched(env, 'T', 'N', tk, dh, tq, scale, ptr.in(3, count), tk, ptr.in(7, count), hd, ptr.out(8, count), hd,
               bh_count, op);
  return r;
}

Backend::AdditiveAttentionResult CudaBackend::additive_attention_forward(const Tensor& query, const Tensor& keys,
                                                                         const Tensor& values, const Tensor& v,
                                                                         const Tensor* lengths) {
  const char* op = "additive_attention";
  const kernels::AdditiveAttentionDims d = check_args(op, query, keys, values, v, device_);
  const float* lens = nullptr;
  if (lengths && lengths->defined()) {
    check_plain_shape(*lengths, device_, op, "lengths", {d.b});
    const std::vector<float> host = lengths->to_vector();
    for (int64_t b = 0; b < d.b; ++b) {
      const float l = host[static_cast<size_t>(b)];
      if (!(l >= 0.0f && l <= static_cast<float>(d.s)) || l != std::floor(l)) {
        throw std::invalid_argument(std::string(op) + ": lengths[" + std::to_string(b) + "] = " + std::to_string(l) +
                                    " is not an integer in [0, " + std::to_string(d.s) + "]");
      }
    }
    lens = lengths->data();
  }
  Env env(*impl_);
  AdditiveAttentionResult r{Tensor::empty({d.b, d.d}, query.device()), Tensor::empty({d.b, d.s}, query.device())};
  TS_CUDA_CHECK(kernels::additive_attention_forward(query.data(), keys.data(), values.data(), v.data(), lens, d,
                                                    r.probs.data(), r.context.data(), env.stream));
  return r;
}

Backend::AdditiveAttentionGrads CudaBackend::additive_attention_backward(const Tensor& dcontext, const Tensor& query,
                                                                         const Tensor& keys, const Tensor& values,
                                                                         const Tensor& v, const Tensor& probs) {
  const char* op = "additive_attention_backward";
  const kernels::AdditiveAttentionDims d = check_args(op, query, keys, values, v, device_);
  check_plain_shape(dcontext, device_, op, "dcontext", {d.b, d.d});
  check_plain_shape(probs, device_, op, "probs", {d.b, d.s});
  Env env(*impl_);
  AdditiveAttentionGrads g{Tensor::empty({d.b, d.a}, query.device()), Tensor::empty({d.b, d.s, d.a}, query.device()),
                           Tensor::empty({d.b, d.s, d.d}, query.device()), Tensor::empty({d.a}, query.device())};
  Tensor ws = workspace_tensor(
      std::max<int64_t>(kernels::additive_attention_backward_workspace(d), 1) * static_cast<int64_t>(sizeof(float)),
      device_);
  TS_CUDA_CHECK(kernels::additive_attention_backward(dcontext.data(), query.data(), keys.data(), values.data(),
                                                     v.data(), probs.data(), d, ws.data(), g.dquery.data(),
                                                     g.dkeys.data(), g.dvalues.data(), g.dv.data(), env.stream));
  return g;
}

}  // namespace ts::engine::cuda
