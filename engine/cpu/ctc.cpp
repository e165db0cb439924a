// The ctc family on the CPU: the CTC loss (Graves et al. 2006), log-softmax fused in, alpha/beta
// recursions in log space, in double. One sample per OpenMP task (samples differ in length, so
// dynamic schedule). The gradient is produced in the same pass as the loss, like cuDNN's CTC: the
// beta recursion runs backwards over time and each frame's gradient is written as soon as its
// beta row is known, so only alpha is stored in full (T_n x (2 L_n + 1) doubles per sample).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/ctc_plan.h"
#include "engine/numerics/ctc.h"

namespace ts::engine::cpu {

namespace {

using numerics::log_add;
using numerics::log_add3;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

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
  if (grad == nullptr || std::isinf(nll)) return nll;  // NaN logits go on, to NaN gradients

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
  check_cpu(logits_in, "ctc_loss", "logits");
  check_cpu(targets, "ctc_loss", "targets");
  check_cpu(input_lengths, "ctc_loss", "input_lengths");
  check_cpu(target_lengths, "ctc_loss", "target_lengths");
  const ctc::Plan plan = ctc::plan(logits_in, targets, input_lengths, target_lengths, blank);
  const int64_t t_max = plan.t_max, n = plan.n, k_count = plan.k;
  const std::vector<int64_t>& labels = plan.labels;
  std::vector<Sample> samples(static_cast<size_t>(n));
  for (size_t i = 0; i < samples.size(); ++i) samples[i] = {plan.frames[i], plan.lengths[i], plan.offsets[i]};

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
    const double weight = plan.weight(i, reduction);
    float* g = grad ? grad + i * k_count : nullptr;
    double nll = ctc_sample(z + i * k_count, stride, k_count, labels.data() + s.offset, s, blank, g, weight);
    const bool infeasible = std::isinf(nll);  // NaN (from NaN logits) is not zeroed
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
  check_cpu(dloss, "ctc_loss", "dloss");
  check_cpu(grad, "ctc_loss", "grad");
  ctc::check_backward(dloss, grad);
  const float g = dloss.data()[0];
  Tensor dx = Tensor::empty(grad.shape(), Device::cpu());
  const float* src = grad.data();
  float* dst = dx.data();
  const int64_t count = grad.numel();
  parallel_for(count, [&](int64_t i) { dst[i] = g * src[i]; });
  return dx;
}

}  // namespace ts::engine::cpu
