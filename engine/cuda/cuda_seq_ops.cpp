// The sequence models' Backend methods (layer norm, multi-head attention) and the CTC loss on
// the GPU (GELU, dropout, label-smoothed cross-entropy and the sum of squares: their families).
// Kernels in kernels_seq.cu; the attention GEMMs are batched cuBLAS calls. Checks and error
// messages follow the CPU backend's (cpu_sequence.cpp, cpu_ctc.cpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/pointwise_kernels.h"
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

}  // namespace

// ---------------------------------------------------------------- layer norm

// ---------------------------------------------------------------- attention

Backend::AttentionResult CudaBackend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                                        const Tensor* key_lengths, int64_t heads, float scale,
                                                        bool causal) {
  const char* op = "attention";
  check_plain(q, device_, op, "q", 3);
  check_plain(k, device_, op, "k", 3);
  check_plain(v, device_, op, "v", 3);
  const int64_t b = q.size(0), tq = q.size(1), hd = q.size(2), tk = k.size(1);
  if (heads < 1 || hd % heads != 0 || k.size(0) != b || v.shape() != k.shape() || k.size(2) != hd) {
    throw std::invalid_argument("attention: q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " +
                                shape_str(v.shape()) + " with " + std::to_string(heads) + " heads");
  }
  const float* lengths = nullptr;
  if (key_lengths && key_lengths->defined()) {
    check_plain(*key_lengths, device_, op, "key_lengths", 1);
    if (key_lengths->size(0) != b) throw std::invalid_argument("attention: key_lengths must be [B]");
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

// ---------------------------------------------------------------- CTC

namespace {

[[noreturn]] void ctc_fail(const std::string& msg) { throw std::invalid_argument("ctc_loss: " + msg); }

// fp32 values that must be integers in [lo, hi] (read on the host).
std::vector<int64_t> as_integers(const Tensor& t, const char* what, int64_t lo, int64_t hi) {
  const std::vector<float> v = t.to_vector();
  std::vector<int64_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = v[i];
    if (!(x == std::floor(x)) || x < static_cast<float>(lo) || x > static_cast<float>(hi)) {
      ctc_fail(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(x) + " is not an integer in [" +
               std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    r[i] = static_cast<int64_t>(x);
  }
  return r;
}

}  // namespace

Backend::CtcResult CudaBackend::ctc_loss_forward(const Tensor& logits_in, const Tensor& targets,
                                                 const Tensor& input_lengths, const Tensor& target_lengths,
                                                 int64_t blank, CtcReduction reduction, bool zero_infinity,
                                                 bool want_grad) {
  const char* op = "ctc_loss";
  check_on(logits_in, device_, op, "logits");
  check_on(targets, device_, op, "targets");
  check_on(input_lengths, device_, op, "input_lengths");
  check_on(target_lengths, device_, op, "target_lengths");
  if (logits_in.dim() != 3) ctc_fail("logits must be [T, N, K], got " + shape_str(logits_in.shape()));
  const int64_t t_max = logits_in.size(0), n = logits_in.size(1), k_count = logits_in.size(2);
  if (k_count < 1) ctc_fail("logits have no classes: " + shape_str(logits_in.shape()));
  if (blank < 0 || blank >= k_count) {
    ctc_fail("blank " + std::to_string(blank) + " is not a class in [0, " + std::to_string(k_count) + ")");
  }
  if (input_lengths.dim() != 1 || input_lengths.size(0) != n || target_lengths.dim() != 1 ||
      target_lengths.size(0) != n) {
    ctc_fail("input_lengths " + shape_str(input_lengths.shape()) + " and target_lengths " +
             shape_str(target_lengths.shape()) + " must both be [N] = [" + std::to_string(n) + "]");
  }
  if (targets.dim() != 1) {
    ctc_fail("targets must be 1-D (the label sequences concatenated), got " + shape_str(targets.shape()));
  }
  const std::vector<int64_t> frames = as_integers(input_lengths, "input_lengths", 0, t_max);
  const std::vector<int64_t> lengths =
      as_integers(target_lengths, "target_lengths", 0, std::numeric_limits<int32_t>::max());
  std::vector<int64_t> offsets(static_cast<size_t>(n));
  int64_t total = 0, max_len = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
    max_len = std::max(max_len, lengths[i]);
  }
  if (total != targets.size(0)) {
    ctc_fail("target_lengths add up to " + std::to_string(total) + " but targets hold " +
             std::to_string(targets.size(0)));
  }
  const std::vector<int64_t> labels = as_integers(targets, "targets", 0, k_count - 1);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == blank) ctc_fail("targets[" + std::to_string(i) + "] is the blank label " + std::to_string(blank));
  }
  const Tensor logits = as_plain(*this, logits_in);

  // frames, lengths, offsets, weights (as doubles) and labels in one upload.
  std::vector<int64_t> packed(static_cast<size_t>(4 * n) + labels.size());
  for (int64_t i = 0; i < n; ++i) {
    const size_t u = static_cast<size_t>(i);
    packed[u] = frames[u];
    packed[static_cast<size_t>(n) + u] = lengths[u];
    packed[static_cast<size_t>(2 * n) + u] = offsets[u];
    const double w = reduction == CtcReduction::mean
                         ? 1.0 / (static_cast<double>(n) * static_cast<double>(std::max<int64_t>(lengths[u], 1)))
                         : 1.0;
    std::memcpy(&packed[static_cast<size_t>(3 * n) + u], &w, sizeof w);
  }
  std::copy(labels.begin(), labels.end(), packed.begin() + 4 * n);
  Tensor args = workspace_tensor(static_cast<int64_t>(std::max<size_t>(packed.size(), 1) * sizeof(int64_t)), device_);
  copy_to_device(args.data(), packed.data(), packed.size() * sizeof(int64_t), device_);

  const int64_t s_max = 2 * max_len + 1;
  auto doubles = [&](int64_t count) {
    return workspace_tensor(std::max<int64_t>(count, 1) * static_cast<int64_t>(sizeof(double)), device_);
  };
  Tensor lp = doubles(n * t_max * k_count), alpha = doubles(n * t_max * s_max), beta = doubles(n * 2 * s_max),
         contrib = doubles(n);
  CtcResult r;
  r.loss = Tensor::empty({1}, logits.device());
  r.nll = Tensor::empty({n}, logits.device());
  if (want_grad) r.grad = Tensor::zeros({t_max, n, k_count}, logits.device());  // frames past T_n stay 0
  Env env(*impl_);
  const auto* base = reinterpret_cast<const int64_t*>(args.data());
  kernels::CtcArgs a;
  a.logits = logits.data();
  a.t_max = t_max;
  a.n = n;
  a.k = k_count;
  a.s_max = s_max;
  a.frames = base;
  a.lengths = base + n;
  a.offsets = base + 2 * n;
  a.weights = reinterpret_cast<const double*>(base + 3 * n);
  a.labels = base + 4 * n;
  a.blank = blank;
  a.zero_infinity = zero_infinity;
  a.lp = reinterpret_cast<double*>(lp.data());
  a.alpha = reinterpret_cast<double*>(alpha.data());
  a.beta = reinterpret_cast<double*>(beta.data());
  a.contrib = reinterpret_cast<double*>(contrib.data());
  a.nll = r.nll.data();
  a.loss = r.loss.data();
  a.grad = want_grad ? r.grad.data() : nullptr;
  TS_CUDA_CHECK(kernels::ctc_loss(a, env.stream));
  return r;
}

Tensor CudaBackend::ctc_loss_backward(const Tensor& dloss, const Tensor& grad) {
  check_on(dloss, device_, "ctc_loss", "dloss");
  check_on(grad, device_, "ctc_loss", "grad");
  if (dloss.numel() != 1 || grad.dim() != 3) {
    ctc_fail("backward: dloss must be [1] and grad [T, N, K], got " + shape_str(dloss.shape()) + " and " +
             shape_str(grad.shape()));
  }
  const Tensor g = as_plain(*this, grad);
  Env env(*impl_);
  Tensor dx = Tensor::empty(g.shape(), g.device());
  TS_CUDA_CHECK(kernels::scale_by_device_scalar(g.data(), dloss.data(), dx.data(), g.numel(), env.stream));
  return dx;
}

}  // namespace ts::engine::cuda
