// The loss family on the GPU (kernels in loss.cu). Checks follow the CPU backend's (cpu/loss.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda/cuda_common.h"
#include "engine/cuda/device_memory.h"
#include "engine/cuda/loss_kernels.h"

namespace ts::engine::cuda {

namespace {

void check_smooth_l1(const Tensor& x, const Tensor& target, const Tensor* weights, float beta, int device,
                     const char* op) {
  check_on(x, device, op, "input");
  check_on(target, device, op, "target");
  if (x.shape() != target.shape()) {
    fail(op, "input " + shape_str(x.shape()) + " and target " + shape_str(target.shape()));
  }
  if (weights) {
    check_on(*weights, device, op, "weights");
    if (weights->shape() != x.shape()) {
      fail(op, "weights " + shape_str(weights->shape()) + " for input " + shape_str(x.shape()));
    }
  }
  if (!(beta >= 0.0f)) fail(op, "beta must be >= 0");
}

}  // namespace

CrossEntropyResult CudaBackend::softmax_cross_entropy_forward(const Tensor& logits_in, const Tensor& labels_in) {
  check_on(logits_in, device_, "softmax_cross_entropy", "logits");
  check_on(labels_in, device_, "softmax_cross_entropy", "labels");
  if (logits_in.dim() != 2 || labels_in.dim() != 1 || labels_in.size(0) != logits_in.size(0)) {
    throw std::invalid_argument("softmax_cross_entropy: expected logits [N, K] and labels [N], got " +
                                shape_str(logits_in.shape()) + " and " + shape_str(labels_in.shape()));
  }
  const Tensor logits = as_plain(*this, logits_in);
  const Tensor labels = as_plain(*this, labels_in);
  const int64_t n = logits.size(0), k = logits.size(1);
  // Bad labels are an error with the CPU backend's message, not an out-of-bounds read: the
  // labels (N floats) are checked on the host, which waits for the forward pass queued so far.
  {
    std::vector<float> lab(static_cast<size_t>(n));
    copy_to_host(lab.data(), labels.data(), lab.size() * sizeof(float), device_);
    for (int64_t i = 0; i < n; ++i) {
      const float v = lab[static_cast<size_t>(i)];
      if (!(v >= 0.0f) || v >= static_cast<float>(k) || v != std::floor(v)) {
        throw std::invalid_argument("softmax_cross_entropy: label " + std::to_string(v) + " at index " +
                                    std::to_string(i) + " is not a class index in [0, " + std::to_string(k) + ")");
      }
    }
  }
  Env env(*impl_);
  CrossEntropyResult r;
  r.probs = Tensor::empty({n, k}, logits.device());
  r.loss = Tensor::empty({1}, logits.device());
  if (n == 0) {
    TS_CUDA_CHECK(kernels::fill(r.loss.data(), 1, 0.0f, env.stream));
    return r;
  }
  Tensor row_loss = workspace_tensor(n * static_cast<int64_t>(sizeof(float)), device_);
  TS_CUDA_CHECK(
      kernels::softmax_xent_forward(logits.data(), labels.data(), n, k, r.probs.data(), row_loss.data(), env.stream));
  Tensor partials = workspace_tensor(kernels::sum_partials(n) * static_cast<int64_t>(sizeof(double)), device_);
  TS_CUDA_CHECK(kernels::sum_all(row_loss.data(), n, reinterpret_cast<double*>(partials.data()),
                                 static_cast<float>(1.0 / static_cast<double>(n)), r.loss.data(), env.stream));
  return r;
}

Tensor CudaBackend::softmax_cross_entropy_backward(const Tensor& dloss, const Tensor& probs_in,
                                                   const Tensor& labels_in) {
  const char* op = "softmax_cross_entropy_backward";
  check_on(dloss, device_, op, "dloss");
  check_on(probs_in, device_, op, "probs");
  check_on(labels_in, device_, op, "labels");
  if (dloss.numel() != 1 || probs_in.dim() != 2 || labels_in.dim() != 1 || labels_in.size(0) != probs_in.size(0)) {
    throw std::invalid_argument(std::string(op) + ": bad shapes " + shape_str(dloss.shape()) + ", " +
                                shape_str(probs_in.shape()) + ", " + shape_str(labels_in.shape()));
  }
  const Tensor probs = as_plain(*this, probs_in), labels = as_plain(*this, labels_in);
  const int64_t n = probs.size(0), k = probs.size(1);
  Env env(*impl_);
  Tensor dx = Tensor::empty({n, k}, probs.device());
  // dloss stays on the device: no host round trip in the backward pass.
  TS_CUDA_CHECK(kernels::softmax_xent_backward(dloss.data(), probs.data(), labels.data(), n, k, dx.data(), env.stream));
  return dx;
}

Backend::NormPenaltyResult CudaBackend::norm_penalty_forward(const Tensor& x_in, float target) {
  const char* op = "norm_penalty";
  check_on(x_in, device_, op, "x");
  if (x_in.dim() != 2 || x_in.size(0) < 1) fail(op, "expected [N, D] with N >= 1, got " + shape_str(x_in.shape()));
  const Tensor x = as_plain(*this, x_in);
  const int64_t n = x.size(0), d = x.size(1);
  Env env(*impl_);
  NormPenaltyResult r{Tensor::empty({1}, x.device()), Tensor::empty({n}, x.device())};
  Tensor terms = workspace_tensor(n * static_cast<int64_t>(sizeof(double)), device_);
  TS_CUDA_CHECK(kernels::norm_penalty_forward(x.data(), n, d, target, r.norms.data(),
                                              reinterpret_cast<double*>(terms.data()), r.loss.data(), env.stream));
  return r;
}

Tensor CudaBackend::norm_penalty_backward(const Tensor& dloss, const Tensor& x_in, const Tensor& norms, float target) {
  const char* op = "norm_penalty_backward";
  check_on(dloss, device_, op, "dloss");
  check_on(norms, device_, op, "norms");
  check_on(x_in, device_, op, "x");
  const Tensor x = as_plain(*this, x_in);
  if (x.dim() != 2) fail(op, "expected [N, D], got " + shape_str(x.shape()));
  const int64_t n = x.size(0), d = x.size(1);
  if (norms.numel() != n || dloss.numel() != 1) {
    fail(op, "norms " + shape_str(norms.shape()) + " / dloss " + shape_str(dloss.shape()) + " for input " +
                 shape_str(x.shape()));
  }
  Env env(*impl_);
  Tensor dx = Tensor::empty(x.shape(), x.device());
  TS_CUDA_CHECK(
      kernels::norm_penalty_backward(dloss.data(), x.data(), norms.data(), n, d, target, dx.data(), env.stream));
  return dx;
}

Tensor CudaBackend::smooth_l1_forward(const Tensor& x_in, const Tensor& target_in, const Tensor* weights_in, float beta,
                                      float scale) {
  const char* op = "smooth_l1";
  check_smooth_l1(x_in, target_in, weights_in, beta, device_, op);
  const Tensor x = as_plain(*this, x_in), t = as_plain(*this, target_in);
  const Tensor w = weights_in ? as_plain(*this, *weights_in) : Tensor();
  const int64_t n = x.numel();
  Env env(*impl_);
  Tensor partials = workspace_tensor(kernels::sum_partials(n) * static_cast<int64_t>(sizeof(double)), device_);
  Tensor y = Tensor::empty({1}, x.device());
  TS_CUDA_CHECK(kernels::smooth_l1_forward(x.data(), t.data(), w.defined() ? w.data() : nullptr, n, beta, scale,
                                           reinterpret_cast<double*>(partials.data()), y.data(), env.stream));
  return y;
}

Tensor CudaBackend::smooth_l1_backward(const Tensor& dloss, const Tensor& x_in, const Tensor& target_in,
                                       const Tensor* weights_in, float beta, float scale) {
  const char* op = "smooth_l1_backward";
  check_smooth_l1(x_in, target_in, weights_in, beta, device_, op);
  check_on(dloss, device_, op, "dloss");
  if (dloss.numel() != 1) fail(op, "dloss must hold one value, got " + shape_str(dloss.shape()));
  const Tensor x = as_plain(*this, x_in), t = as_plain(*this, target_in);
  const Tensor w = weights_in ? as_plain(*this, *weights_in) : Tensor();
  Env env(*impl_);
  Tensor dx = Tensor::empty(x.shape(), x.device());
  TS_CUDA_CHECK(kernels::smooth_l1_backward(dloss.data(), x.data(), t.data(), w.defined() ? w.data() : nullptr,
                                            x.numel(), beta, scale, dx.data(), env.stream));
  return dx;
}

Backend::SmoothedCrossEntropy CudaBackend::label_smoothed_ce_forward(const Tensor& logits, const Tensor& labels,
                                                                     float eps, int64_t ignore_index,
                                                                     float normalizer) {
  const char* op = "label_smoothed_ce";
  check_plain(logits, device_, op, "logits", 2);
  check_plain(labels, device_, op, "labels", 1);
  const int64_t n = logits.size(0), vocab = logits.size(1);
  if (labels.size(0) != n) throw std::invalid_argument("label_smoothed_ce: labels must be [N] for logits [N, V]");
  if (!(normalizer > 0.0f)) throw std::invalid_argument("label_smoothed_ce: normalizer must be positive");
  const std::vector<float> lab = labels.to_vector();  // checked on the host, as on the CPU
  for (int64_t i = 0; i < n; ++i) {
    const float li = lab[static_cast<size_t>(i)];
    const auto y = static_cast<int64_t>(li);
    if (static_cast<float>(y) != li || ((y < 0 || y >= vocab) && y != ignore_index)) {
      throw std::invalid_argument("label_smoothed_ce: label " + std::to_string(li) + " at row " + std::to_string(i) +
                                  " is not in [0, " + std::to_string(vocab) + ") nor the ignored index");
    }
  }
  Env env(*impl_);
  SmoothedCrossEntropy r{Tensor::empty({1}, logits.device()), Tensor::empty({n}, logits.device())};
  Tensor terms = workspace_tensor(std::max<int64_t>(n, 1) * static_cast<int64_t>(sizeof(double)), device_);
  TS_CUDA_CHECK(kernels::label_smoothed_ce_forward(logits.data(), labels.data(), n, vocab, eps, ignore_index,
                                                   normalizer, r.lse.data(), reinterpret_cast<double*>(terms.data()),
                                                   r.loss.data(), env.stream));
  return r;
}

Tensor CudaBackend::label_smoothed_ce_backward(const Tensor& dloss, const Tensor& logits, const Tensor& lse,
                                               const Tensor& labels, float eps, int64_t ignore_index,
                                               float normalizer) {
  const char* op = "label_smoothed_ce_backward";
  check_plain(logits, device_, op, "logits", 2);
  check_on(dloss, device_, op, "dloss");
  check_on(lse, device_, op, "lse");
  check_on(labels, device_, op, "labels");
  const int64_t n = logits.size(0), vocab = logits.size(1);
  if (dloss.numel() != 1 || lse.numel() != n || labels.numel() != n) {
    throw std::invalid_argument("label_smoothed_ce_backward: dloss " + shape_str(dloss.shape()) + ", lse " +
                                shape_str(lse.shape()) + ", labels " + shape_str(labels.shape()) + " for logits " +
                                shape_str(logits.shape()));
  }
  Env env(*impl_);
  Tensor dx = Tensor::empty({n, vocab}, logits.device());
  TS_CUDA_CHECK(kernels::label_smoothed_ce_backward(dloss.data(), logits.data(), lse.data(), labels.data(), n, vocab,
                                                    eps, ignore_index, normalizer, dx.data(), env.stream));
  return dx;
}

}  // namespace ts::engine::cuda
