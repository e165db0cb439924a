// CTC loss (Graves et al. 2006) on the CPU: log-softmax fused in, alpha/beta recursions in log
// space, in double. One sample per OpenMP task (samples differ in length, so dynamic
// schedule). The gradient is produced in the same pass as the loss, like cuDNN's CTC: the
// beta recursion runs backwards over time and each frame's gradient is written as soon as its
// beta row is known, so only alpha is stored in full (T_n x (2 L_n + 1) doubles per sample).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"

namespace ts::engine::cpu {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("ctc_loss: " + msg); }

void check_cpu(const Tensor& t, const char* what) {
  if (!t.defined()) fail(std::string(what) + " is undefined");
  if (!t.device().is_cpu()) fail(std::string(what) + " is on " + t.device().str());
}

// fp32 values that must be integers in [lo, hi].
std::vector<int64_t> as_integers(const Tensor& t, const char* what, int64_t lo, int64_t hi) {
  const std::vector<float> v = t.to_vector();
  std::vector<int64_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = v[i];
    if (!(x == std::floor(x)) || x < static_cast<float>(lo) || x > static_cast<float>(hi)) {
      fail(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(x) + " is not an integer in [" +
           std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    r[i] = static_cast<int64_t>(x);
  }
  return r;
}

inline double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == kNegInf) return a;
  return a + std::log1p(std::exp(b - a));
}

// log(e^a + e^b + e^c) with the largest term factored out: at most two exp and one log (the
// recursions' inner loop, so no transcendental is spent on exp(0) or exp(-inf)).
inline double log_add3(double a, double b, double c) {
  if (a < b) std::swap(a, b);
  if (a < c) std::swap(a, c);
  if (a == kNegInf) return kNegInf;
  double sum = 1.0;
  if (b != kNegInf) sum += std::exp(b - a);
  if (c != kNegInf) sum += std::exp(c - a);
  return a + std::log(sum);
}

struct Sample {
  int64_t frames = 0;  // T_n
  int64_t length = 0;  // L_n
  int64_t offset = 0;  // first label in the concatenated targets
};

// -log p(labels | logits) for one sample; `grad` (when given, stride n_stride between frames)
// receives weight * (softmax - occupancy) for its T_n frames. Returns +inf when no alignment
// exists; the gradient is then left for the caller to fill.
double ctc_sample(const float* logits, int64_t n_stride, int64_t k_count, const int64_t* labels, const Sample& s,
                  int64_t blank, float* grad, double weight) {
  const int64_t t_count = s.frames, l_count = s.length;
  const int64_t states = 2 * l_count + 1;
  if (t_count == 0) return l_count == 0 ? 0.0 : std::numeric_limits<double>::infinity();

  // Log-softmax per frame, in double.
  std::vector<double> lp(static_cast<size_t>(t_count * k_count));
  for (int64_t t = 0; t < t_count; ++t) {
    const float* z = logits + t * n_stride;
    double* o = &lp[static_cast<size_t>(t * k_count)];
    float m = z[0];
    for (int64_t k = 1; k < k_count; ++k) m = std::max(m, z[k]);
    double sum = 0;
    for (int64_t k = 0; k < k_count; ++k) sum += std::exp(static_cast<double>(z[k]) - m);
    const double lse = static_cast<double>(m) + std::log(sum);
    for (int64_t k = 0; k < k_count; ++k) o[k] = static_cast<double>(z[k]) - lse;
  }

  // The extended label sequence l': blank, l1, blank, l2, ..., blank. A state may skip the
  // blank before it only when its label differs from the one two states back.
  std::vector<int64_t> ext(static_cast<size_t>(states));
  std::vector<char> skip(static_cast<size_t>(states), 0);
  for (int64_t q = 0; q < states; ++q) {
    ext[static_cast<size_t>(q)] = (q % 2 == 0) ? blank : labels[(q - 1) / 2];
    if (q % 2 == 1 && q >= 3 && labels[(q - 1) / 2] != labels[(q - 3) / 2]) skip[static_cast<size_t>(q)] = 1;
  }
  // At time t only states in [lo(t), hi(t)) lie on a complete path: reachable from the start
  // (q <= 2t + 1) and able to reach the end in the frames left (q >= S - 2 (T - t)).
  auto lo = [&](int64_t t) { return std::max<int64_t>(0, states - 2 * (t_count - t)); };
  auto hi = [&](int64_t t) { return std::min<int64_t>(states, 2 * t + 2); };

  std::vector<double> alpha(static_cast<size_t>(t_count * states), kNegInf);
  auto A = [&](int64_t t, int64_t q) -> double& { return alpha[static_cast<size_t>(t * states + q)]; };
  auto LP = [&](int64_t t, int64_t k) { return lp[static_cast<size_t>(t * k_count + k)]; };
  for (int64_t q = lo(0); q < hi(0); ++q) A(0, q) = LP(0, ext[static_cast<size_t>(q)]);
  for (int64_t t = 1; t < t_count; ++t) {
    for (int64_t q = lo(t); q < hi(t); ++q) {
      const double a0 = A(t - 1, q);
      const double a1 = q >= 1 ? A(t - 1, q - 1) : kNegInf;
      const double a2 = skip[static_cast<size_t>(q)] ? A(t - 1, q - 2) : kNegInf;
      A(t, q) = log_add3(a0, a1, a2) + LP(t, ext[static_cast<size_t>(q)]);
    }
  }
  const int64_t last = t_count - 1;
  const double log_p = states > 1 ? log_add(A(last, states - 1), A(last, states - 2)) : A(last, 0);
  const double nll = -log_p;
  if (grad == nullptr || std::isinf(nll)) return nll;   // NaN logits go on, to NaN gradients

  // Beta (including y_t, like alpha), two rows; per frame, occupancy per label
  // gamma_t(k) = sum_{q: l'_q = k} alpha_t(q) beta_t(q) / (y_t(k) p), and
  // d(-log p)/dz_t(k) = y_t(k) - gamma_t(k).
  std::vector<double> beta(static_cast<size_t>(states), kNegInf), next(static_cast<size_t>(states), kNegInf);
  std::vector<double> occ(static_cast<size_t>(k_count));
  for (int64_t t = last; t >= 0; --t) {
    std::fill(beta.begin(), beta.end(), kNegInf);
    for (int64_t q = lo(t); q < hi(t); ++q) {
      const size_t uq = static_cast<size_t>(q);
      double b;
      if (t == last) {
        b = (q >= states - 2) ? 0.0 : kNegInf;
      } else {
        const double b0 = next[uq];
        const double b1 = q + 1 < states ? next[uq + 1] : kNegInf;
        const double b2 = (q + 2 < states && skip[uq + 2]) ? next[uq + 2] : kNegInf;
        b = log_add3(b0, b1, b2);
      }
      beta[uq] = b + LP(t, ext[uq]);
    }
    // The occupancy sums in linear space relative to the frame's largest term: one exp per
    // state instead of a log-add (terms below e^-745 of the largest vanish, harmlessly).
    double top = kNegInf;
    for (int64_t q = lo(t); q < hi(t); ++q) top = std::max(top, A(t, q) + beta[static_cast<size_t>(q)]);
    std::fill(occ.begin(), occ.end(), 0.0);
    for (int64_t q = lo(t); q < hi(t); ++q) {
      occ[static_cast<size_t>(ext[static_cast<size_t>(q)])] += std::exp(A(t, q) + beta[static_cast<size_t>(q)] - top);
    }
    float* g = grad + t * n_stride;
    for (int64_t k = 0; k < k_count; ++k) {
      const double y = std::exp(LP(t, k));
      const double o = occ[static_cast<size_t>(k)];
      const double gamma = o > 0 ? std::exp(std::log(o) + top + nll - LP(t, k)) : 0.0;
      g[k] = static_cast<float>(weight * (y - gamma));
    }
    std::swap(beta, next);
  }
  return nll;
}

}  // namespace

Backend::CtcResult CpuBackend::ctc_loss_forward(const Tensor& logits_in, const Tensor& targets,
                                                const Tensor& input_lengths, const Tensor& target_lengths,
                                                int64_t blank, CtcReduction reduction, bool zero_infinity,
                                                bool want_grad) {
  check_cpu(logits_in, "logits");
  check_cpu(targets, "targets");
  check_cpu(input_lengths, "input_lengths");
  check_cpu(target_lengths, "target_lengths");
  if (logits_in.dim() != 3) fail("logits must be [T, N, K], got " + shape_str(logits_in.shape()));
  const int64_t t_max = logits_in.size(0), n = logits_in.size(1), k_count = logits_in.size(2);
  if (k_count < 1) fail("logits have no classes: " + shape_str(logits_in.shape()));
  if (blank < 0 || blank >= k_count) {
    fail("blank " + std::to_string(blank) + " is not a class in [0, " + std::to_string(k_count) + ")");
  }
  if (input_lengths.dim() != 1 || input_lengths.size(0) != n || target_lengths.dim() != 1 ||
      target_lengths.size(0) != n) {
    fail("input_lengths " + shape_str(input_lengths.shape()) + " and target_lengths " +
         shape_str(target_lengths.shape()) + " must both be [N] = [" + std::to_string(n) + "]");
  }
  if (targets.dim() != 1)
    fail("targets must be 1-D (the label sequences concatenated), got " + shape_str(targets.shape()));

  const std::vector<int64_t> frames = as_integers(input_lengths, "input_lengths", 0, t_max);
  const std::vector<int64_t> lengths =
      as_integers(target_lengths, "target_lengths", 0, std::numeric_limits<int32_t>::max());
  std::vector<Sample> samples(static_cast<size_t>(n));
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    samples[static_cast<size_t>(i)] = {frames[static_cast<size_t>(i)], lengths[static_cast<size_t>(i)], total};
    total += lengths[static_cast<size_t>(i)];
  }
  if (total != targets.size(0)) {
    fail("target_lengths add up to " + std::to_string(total) + " but targets hold " + std::to_string(targets.size(0)));
  }
  const std::vector<int64_t> labels = as_integers(targets, "targets", 0, k_count - 1);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == blank) fail("targets[" + std::to_string(i) + "] is the blank label " + std::to_string(blank));
  }

  const Tensor logits = logits_in.layout().is_plain() ? logits_in : to_layout(logits_in, Layout::plain());
  CtcResult r;
  r.loss = Tensor::empty({1}, Device::cpu());
  r.nll = Tensor::empty({n}, Device::cpu());
  if (want_grad) r.grad = Tensor::empty({t_max, n, k_count}, Device::cpu());
  const float* z = logits.data();
  float* nll_out = r.nll.data();
  float* grad = want_grad ? r.grad.data() : nullptr;
  const int64_t stride = n * k_count;  // between frames of one sample
  std::vector<double> contribution(static_cast<size_t>(n), 0.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();

#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    const Sample& s = samples[static_cast<size_t>(i)];
    const double weight = reduction == CtcReduction::mean
                              ? 1.0 / (static_cast<double>(n) * static_cast<double>(std::max<int64_t>(s.length, 1)))
                              : 1.0;
    float* g = grad ? grad + i * k_count : nullptr;
    double nll = ctc_sample(z + i * k_count, stride, k_count, labels.data() + s.offset, s, blank, g, weight);
    const bool infeasible = std::isinf(nll);   // NaN (from NaN logits) is not zeroed
    if (infeasible && zero_infinity) nll = 0;
    nll_out[i] = static_cast<float>(nll);
    contribution[static_cast<size_t>(i)] = weight * nll;
    if (g) {
      // Infeasible: no occupancy exists; zero_infinity zeroes it, otherwise NaN as PyTorch gives.
      if (infeasible) {
        const float fill = zero_infinity ? 0.0f : static_cast<float>(nan);
        for (int64_t t = 0; t < s.frames; ++t) std::fill(g + t * stride, g + t * stride + k_count, fill);
      }
      for (int64_t t = s.frames; t < t_max; ++t) std::fill(g + t * stride, g + t * stride + k_count, 0.0f);
    }
  }
  double loss = 0;  // summed in sample order: the same result for any thread count
  for (double c : contribution) loss += c;
  r.loss.data()[0] = static_cast<float>(loss);
  return r;
}

Tensor CpuBackend::ctc_loss_backward(const Tensor& dloss, const Tensor& grad) {
  check_cpu(dloss, "dloss");
  check_cpu(grad, "grad");
  if (dloss.numel() != 1 || grad.dim() != 3) {
    fail("backward: dloss must be [1] and grad [T, N, K], got " + shape_str(dloss.shape()) + " and " +
         shape_str(grad.shape()));
  }
  const float g = dloss.data()[0];
  Tensor dx = Tensor::empty(grad.shape(), Device::cpu());
  const float* src = grad.data();
  float* dst = dx.data();
  const int64_t count = grad.numel();
#pragma omp parallel for simd if (count > (1 << 15)) schedule(static)
  for (int64_t i = 0; i < count; ++i) dst[i] = g * src[i];
  return dx;
}

}  // namespace ts::engine::cpu
