// The loss family on the CPU: softmax cross-entropy, label-smoothed cross-entropy, smooth-L1 and
// the gradient-norm penalty; plain OpenMP loops, sums in double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/fast_math.h"

namespace ts::engine::cpu {

namespace {

// The label-smoothed loss's rows, vectorized (libm's exp is scalar and was 5% of a transformer
// step): fast_exp's terms (relative error 1e-7) summed in double. AVX2 where the machine has it.
struct RowSums {
  float max;
  double exp_sum;  // sum_k exp(x_k - max)
  double sum;      // sum_k x_k
};

__attribute__((target_clones("avx2", "default"))) RowSums row_sums(const float* row, int64_t n) {
  float mx = row[0];
#pragma omp simd reduction(max : mx)
  for (int64_t k = 1; k < n; ++k) mx = std::max(mx, row[k]);
  double s = 0, sx = 0;
#pragma omp simd reduction(+ : s, sx)
  for (int64_t k = 0; k < n; ++k) {
    s += static_cast<double>(fast_exp(row[k] - mx));
    sx += static_cast<double>(row[k]);
  }
  return {mx, s, sx};
}

// out_k = g (exp(x_k - lse) - off): the gradient of one row before its label's term.
__attribute__((target_clones("avx2", "default"))) void row_gradient(const float* row, int64_t n, float lse, float g,
                                                                    float off, float* out) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) out[k] = g * (fast_exp(row[k] - lse) - off);
}

void check_smooth_l1(const Tensor& x, const Tensor& target, const Tensor* weights, float beta, const char* op) {
  check_cpu(x, op, "input");
  check_cpu(target, op, "target");
  if (x.shape() != target.shape())
    fail(op, "input " + shape_str(x.shape()) + " and target " + shape_str(target.shape()));
  if (weights) {
    check_cpu(*weights, op, "weights");
    if (weights->shape() != x.shape())
      fail(op, "weights " + shape_str(weights->shape()) + " for input " + shape_str(x.shape()));
  }
  if (!(beta >= 0.0f)) fail(op, "beta must be >= 0");
}

}  // namespace

Backend::NormPenaltyResult CpuBackend::norm_penalty_forward(const Tensor& x_in, float target) {
  check_cpu(x_in, "norm_penalty");
  if (x_in.dim() != 2 || x_in.size(0) < 1) {
    throw std::invalid_argument("norm_penalty: expected [N, D] with N >= 1, got " + shape_str(x_in.shape()));
  }
  const Tensor x = as_layout(*this, x_in, Layout::plain());
  const int64_t n = x.size(0), dim = x.size(1);
  NormPenaltyResult r{Tensor::empty({1}, x.device()), Tensor::empty({n}, x.device())};
  const float* p = x.data();
  float* norms = r.norms.data();
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) if (n * dim > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0.0;
    for (int64_t k = 0; k < dim; ++k) ss += static_cast<double>(p[i * dim + k]) * p[i * dim + k];
    const double norm = std::sqrt(ss);
    norms[i] = static_cast<float>(norm);
    total += (norm - target) * (norm - target);
  }
  r.loss.data()[0] = static_cast<float>(total / static_cast<double>(n));
  return r;
}

Tensor CpuBackend::norm_penalty_backward(const Tensor& dloss, const Tensor& x_in, const Tensor& norms, float target) {
  check_cpu(dloss, "norm_penalty_backward");
  check_cpu(norms, "norm_penalty_backward");
  check_cpu(x_in, "norm_penalty_backward");
  const Tensor x = as_layout(*this, x_in, Layout::plain());
  const int64_t n = x.size(0), dim = x.size(1);
  if (norms.numel() != n || dloss.numel() != 1) {
    throw std::invalid_argument("norm_penalty_backward: norms " + shape_str(norms.shape()) + " / dloss " +
                                shape_str(dloss.shape()) + " for input " + shape_str(x.shape()));
  }
  Tensor dx = Tensor::empty(x.shape(), x.device());
  const float g = dloss.item();
  const float* p = x.data();
  const float* nm = norms.data();
  float* d = dx.data();
#pragma omp parallel for if (n * dim > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    // The norm's gradient is undefined at 0; PyTorch's gives 0 there too.
    const float coef = nm[i] > 0.0f ? g * 2.0f * (nm[i] - target) / (static_cast<float>(n) * nm[i]) : 0.0f;
    for (int64_t k = 0; k < dim; ++k) d[i * dim + k] = coef * p[i * dim + k];
  }
  return dx;
}

CrossEntropyResult CpuBackend::softmax_cross_entropy_forward(const Tensor& logits_in, const Tensor& labels_in) {
  check_cpu(logits_in, "softmax_cross_entropy");
  check_cpu(labels_in, "softmax_cross_entropy");
  if (logits_in.dim() != 2 || labels_in.dim() != 1 || labels_in.size(0) != logits_in.size(0)) {
    throw std::invalid_argument("softmax_cross_entropy: expected logits [N, K] and labels [N], got " +
                                shape_str(logits_in.shape()) + " and " + shape_str(labels_in.shape()));
  }
  const Tensor logits = as_layout(*this, logits_in, Layout::plain());
  const Tensor labels = as_layout(*this, labels_in, Layout::plain());
  const int64_t n = logits.size(0), k = logits.size(1);
  const float* lab = labels.data();
  for (int64_t i = 0; i < n; ++i) {
    const float v = lab[i];
    if (!(v >= 0.0f) || v >= static_cast<float>(k) || v != std::floor(v)) {
      throw std::invalid_argument("softmax_cross_entropy: label " + std::to_string(v) + " at index " +
                                  std::to_string(i) + " is not a class index in [0, " + std::to_string(k) + ")");
    }
  }
  CrossEntropyResult r;
  r.probs = Tensor::empty({n, k}, logits.device());
  const float* z = logits.data();
  float* pr = r.probs.data();
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) if (n * k > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const float* zi = z + i * k;
    float* pi = pr + i * k;
    float m = zi[0];
    for (int64_t j = 1; j < k; ++j) m = std::max(m, zi[j]);
    double s = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      const float e = std::exp(zi[j] - m);
      pi[j] = e;
      s += e;
    }
    const float inv = static_cast<float>(1.0 / s);
    for (int64_t j = 0; j < k; ++j) pi[j] *= inv;
    const auto c = static_cast<int64_t>(lab[i]);
    total += std::log(s) + static_cast<double>(m) - static_cast<double>(zi[c]);  // -log softmax
  }
  r.loss = Tensor::empty({1}, logits.device());
  r.loss.data()[0] = n > 0 ? static_cast<float>(total / static_cast<double>(n)) : 0.0f;
  return r;
}

Tensor CpuBackend::softmax_cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& labels) {
  check_cpu(dloss, "softmax_cross_entropy_backward");
  check_cpu(probs, "softmax_cross_entropy_backward");
  check_cpu(labels, "softmax_cross_entropy_backward");
  if (dloss.numel() != 1 || probs.dim() != 2 || labels.dim() != 1 || labels.size(0) != probs.size(0)) {
    throw std::invalid_argument("softmax_cross_entropy_backward: bad shapes " + shape_str(dloss.shape()) + ", " +
                                shape_str(probs.shape()) + ", " + shape_str(labels.shape()));
  }
  const int64_t n = probs.size(0), k = probs.size(1);
  const float g = dloss.item() / static_cast<float>(n > 0 ? n : 1);
  Tensor dx = Tensor::empty({n, k}, probs.device());
  const float* p = probs.data();
  const float* lab = labels.data();
  float* d = dx.data();
#pragma omp parallel for if (n * k > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) d[i * k + j] = g * p[i * k + j];
    d[i * k + static_cast<int64_t>(lab[i])] -= g;
  }
  return dx;
}

Backend::SmoothedCrossEntropy CpuBackend::label_smoothed_ce_forward(const Tensor& logits, const Tensor& labels,
                                                                    float eps, int64_t ignore_index, float normalizer) {
  check_plain(logits, "label_smoothed_ce", "logits", 2);
  check_plain(labels, "label_smoothed_ce", "labels", 1);
  const int64_t n = logits.size(0), vocab = logits.size(1);
  if (labels.size(0) != n) throw std::invalid_argument("label_smoothed_ce: labels must be [N] for logits [N, V]");
  if (!(normalizer > 0.0f)) throw std::invalid_argument("label_smoothed_ce: normalizer must be positive");
  const float *x = logits.data(), *lab = labels.data();
  for (int64_t i = 0; i < n; ++i) {
    const auto y = static_cast<int64_t>(lab[i]);
    if (static_cast<float>(y) != lab[i] || ((y < 0 || y >= vocab) && y != ignore_index)) {
      throw std::invalid_argument("label_smoothed_ce: label " + std::to_string(lab[i]) + " at row " +
                                  std::to_string(i) + " is not in [0, " + std::to_string(vocab) +
                                  ") nor the ignored index");
    }
  }
  SmoothedCrossEntropy r{Tensor::empty({1}, logits.device()), Tensor::empty({n}, logits.device())};
  float* lse = r.lse.data();
  double total = 0;
#pragma omp parallel for reduction(+ : total) if (n * vocab > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const auto y = static_cast<int64_t>(lab[i]);
    if (y == ignore_index) {
      lse[i] = 0.0f;
      continue;
    }
    const float* row = x + i * vocab;
    const RowSums rs = row_sums(row, vocab);
    const double sum_x = rs.sum;
    const double l = rs.max + std::log(rs.exp_sum);
    lse[i] = static_cast<float>(l);
    // -sum_k q_k log p_k with log p_k = x_k - lse.
    total += (1.0 - eps) * (l - row[y]) + eps * (l - sum_x / static_cast<double>(vocab));
  }
  r.loss.data()[0] = static_cast<float>(total / normalizer);
  return r;
}

Tensor CpuBackend::label_smoothed_ce_backward(const Tensor& dloss, const Tensor& logits, const Tensor& lse,
                                              const Tensor& labels, float eps, int64_t ignore_index, float normalizer) {
  check_plain(logits, "label_smoothed_ce_backward", "logits", 2);
  const int64_t n = logits.size(0), vocab = logits.size(1);
  Tensor dx = Tensor::empty({n, vocab}, logits.device());
  const float g = dloss.item() / normalizer;
  const float *x = logits.data(), *l = lse.data(), *lab = labels.data();
  float* d = dx.data();
  const float off = eps / static_cast<float>(vocab);
#pragma omp parallel for if (n * vocab > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const auto y = static_cast<int64_t>(lab[i]);
    float* out = d + i * vocab;
    if (y == ignore_index) {
      std::fill(out, out + vocab, 0.0f);
      continue;
    }
    row_gradient(x + i * vocab, vocab, l[i], g, off, out);
    out[y] -= g * (1.0f - eps);
  }
  return dx;
}

Tensor CpuBackend::smooth_l1_forward(const Tensor& x_in, const Tensor& target_in, const Tensor* weights_in, float beta,
                                     float scale) {
  const char* op = "smooth_l1";
  check_smooth_l1(x_in, target_in, weights_in, beta, op);
  const Tensor x = plain(*this, x_in), t = plain(*this, target_in);
  const Tensor w = weights_in ? plain(*this, *weights_in) : Tensor();
  const float* px = x.data();
  const float* pt = t.data();
  const float* pw = w.defined() ? w.data() : nullptr;
  const int64_t n = x.numel();
  const double half_beta = 0.5 * beta;
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::abs(static_cast<double>(px[i]) - pt[i]);
    const double l = d < beta ? 0.5 * d * d / beta : d - half_beta;
    total += pw ? pw[i] * l : l;
  }
  Tensor y = Tensor::empty({1}, x.device());
  y.data()[0] = static_cast<float>(total * scale);
  return y;
}

Tensor CpuBackend::smooth_l1_backward(const Tensor& dloss, const Tensor& x_in, const Tensor& target_in,
                                      const Tensor* weights_in, float beta, float scale) {
  const char* op = "smooth_l1_backward";
  check_smooth_l1(x_in, target_in, weights_in, beta, op);
  check_cpu(dloss, op, "dloss");
  if (dloss.numel() != 1) fail(op, "dloss must hold one value, got " + shape_str(dloss.shape()));
  const Tensor x = plain(*this, x_in), t = plain(*this, target_in);
  const Tensor w = weights_in ? plain(*this, *weights_in) : Tensor();
  const float g = dloss.item() * scale;
  const float* px = x.data();
  const float* pt = t.data();
  const float* pw = w.defined() ? w.data() : nullptr;
  Tensor dx = Tensor::empty(x.shape(), x.device());
  float* pd = dx.data();
  const int64_t n = x.numel();
#pragma omp parallel for if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const float d = px[i] - pt[i];
    // d l / d d: d / beta inside the quadratic zone, sign(d) outside.
    const float dl = std::abs(d) < beta ? d / beta : static_cast<float>((d > 0.0f) - (d < 0.0f));
    pd[i] = g * (pw ? pw[i] : 1.0f) * dl;
  }
  return dx;
}

}  // namespace ts::engine::cpu
