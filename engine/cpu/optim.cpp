// The optimizer family on the CPU: SGD with momentum, Adam and RMSProp, in place.
//
// RMSProp's update (A3C's shared optimizer). Asynchronous learners run it at once on the same
// parameters and statistics without a lock, as the A3C paper does (Hogwild, Recht et al.
// 2011): an element read by one learner while another writes it may lose that other update,
// which the algorithm tolerates. Each element is an aligned 4-byte float, so no value is ever
// torn; nothing else is shared (the gradient is the learner's own).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/cpu/cpu_common.h"

namespace ts::engine::cpu {

namespace {

// One span. A square root and a division per element make this loop compute-bound, so it is
// built for AVX2 too (target_clones: the build targets plain x86-64); this file is compiled
// without errno for the square root (engine/CMakeLists.txt), which would keep the loop scalar.
__attribute__((target_clones("avx2", "default"))) void rmsprop_span(int64_t n, float* __restrict p,
                                                                    const float* __restrict g, float* __restrict s,
                                                                    float lr, float alpha, float eps, bool inside) {
  const float one_minus_alpha = 1.0f - alpha;
  if (inside) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float si = alpha * s[i] + one_minus_alpha * g[i] * g[i];
      s[i] = si;
      p[i] -= lr * g[i] / std::sqrt(si + eps);
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float si = alpha * s[i] + one_minus_alpha * g[i] * g[i];
      s[i] = si;
      p[i] -= lr * g[i] / (std::sqrt(si) + eps);
    }
  }
}

}  // namespace

void CpuBackend::rmsprop_step(const Tensor& param, const Tensor& grad_in, const Tensor& square_avg, float lr,
                              float alpha, float eps, bool eps_inside_sqrt) {
  for (const Tensor* t : {&param, &grad_in, &square_avg}) {
    if (!t->defined() || !t->device().is_cpu()) throw std::invalid_argument("rmsprop_step: needs CPU tensors");
  }
  // Elementwise over the storage, in the parameter's layout (packed weights too).
  if (square_avg.layout() != param.layout()) {
    throw std::invalid_argument("rmsprop_step: square_avg layout differs from param");
  }
  if (grad_in.shape() != param.shape() || square_avg.shape() != param.shape()) {
    throw std::invalid_argument("rmsprop_step: param " + shape_str(param.shape()) + ", grad " +
                                shape_str(grad_in.shape()) + " and square_avg " + shape_str(square_avg.shape()) +
                                " differ");
  }
  const Tensor grad = as_layout(*this, grad_in, param.layout());
  float* p = param.data();
  const float* g = grad.data();
  float* s = square_avg.data();
  const int64_t n = param.storage_numel();
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 4)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t start = c * kChunk;
    rmsprop_span(std::min(kChunk, n - start), p + start, g + start, s + start, lr, alpha, eps, eps_inside_sqrt);
  }
}

void CpuBackend::sgd_step(const Tensor& param, const Tensor& grad_in, const Tensor& buf, float lr, float momentum,
                          float weight_decay, bool nesterov) {
  check_same(param, grad_in, "sgd_step");
  const Tensor grad = as_layout(*this, grad_in, param.layout());
  float* w = param.data();
  const float* g = grad.data();
  const int64_t n = param.storage_numel();
  if (!buf.defined()) {
    parallel_for(n, [=](int64_t i) { w[i] -= lr * (g[i] + weight_decay * w[i]); });
    return;
  }
  check_same(param, buf, "sgd_step");
  if (buf.layout() != param.layout())
    throw std::invalid_argument("sgd_step: momentum buffer layout differs from param");
  float* b = buf.data();
  parallel_for(n, [=](int64_t i) {
    const float gi = g[i] + weight_decay * w[i];
    const float bi = momentum * b[i] + gi;
    b[i] = bi;
    w[i] -= lr * (nesterov ? gi + momentum * bi : bi);
  });
}

void CpuBackend::adam_step(const Tensor& param, const Tensor& grad_in, const Tensor& m, const Tensor& v, float lr,
                           float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  check_same(param, grad_in, "adam_step");
  check_same(param, m, "adam_step");
  check_same(param, v, "adam_step");
  if (m.layout() != param.layout() || v.layout() != param.layout()) {
    throw std::invalid_argument("adam_step: moment buffer layout differs from param");
  }
  if (step < 1) throw std::invalid_argument("adam_step: step counts from 1, got " + std::to_string(step));
  const Tensor grad = as_layout(*this, grad_in, param.layout());
  float* w = param.data();
  const float* g = grad.data();
  float* pm = m.data();
  float* pv = v.data();
  const float step_size = lr / static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), step));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(beta2), step)));
  parallel_for(param.storage_numel(), [=](int64_t i) {
    const float gi = g[i] + weight_decay * w[i];
    const float mi = beta1 * pm[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * pv[i] + (1.0f - beta2) * gi * gi;
    pm[i] = mi;
    pv[i] = vi;
    w[i] -= step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
  });
}

}  // namespace ts::engine::cpu
