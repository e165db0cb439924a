// The pointwise family on the CPU: ReLU, clipped ReLU, tanh, GELU, exp, add, mul, scale,
// add-in-place and dropout's mask (numerics/dropout.h, as on the GPU); OpenMP loops over the
// storage, any layout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/cpu_common.h"
#include "engine/cpu/fast_math.h"
#include "engine/numerics/dropout.h"

namespace ts::engine::cpu {

namespace {}  // namespace

Tensor CpuBackend::relu_forward(const Tensor& x) {
  check_cpu(x, "relu");
  Tensor y = Tensor::empty(x.shape(), x.device(), x.layout());
  const float* s = x.data();
  float* d = y.data();
  parallel_for(x.storage_numel(), [=](int64_t i) { d[i] = s[i] > 0.0f ? s[i] : 0.0f; });
  return y;
}

Tensor CpuBackend::relu_backward(const Tensor& dy_in, const Tensor& y) {
  check_same(dy_in, y, "relu_backward");
  const Tensor dy = as_layout(*this, dy_in, y.layout());
  Tensor dx = Tensor::empty(y.shape(), y.device(), y.layout());
  const float* g = dy.data();
  const float* yy = y.data();
  float* d = dx.data();
  parallel_for(y.storage_numel(), [=](int64_t i) { d[i] = yy[i] > 0.0f ? g[i] : 0.0f; });
  return dx;
}

Tensor CpuBackend::add(const Tensor& a, const Tensor& b_in) {
  check_same(a, b_in, "add");
  const Tensor b = as_layout(*this, b_in, a.layout());
  Tensor y = Tensor::empty(a.shape(), a.device(), a.layout());
  const float* pa = a.data();
  const float* pb = b.data();
  float* d = y.data();
  parallel_for(a.storage_numel(), [=](int64_t i) { d[i] = pa[i] + pb[i]; });
  return y;
}

Tensor CpuBackend::mul(const Tensor& a, const Tensor& b_in) {
  check_same(a, b_in, "mul");
  const Tensor b = as_layout(*this, b_in, a.layout());
  Tensor y = Tensor::empty(a.shape(), a.device(), a.layout());
  const float* pa = a.data();
  const float* pb = b.data();
  float* d = y.data();
  parallel_for(a.storage_numel(), [=](int64_t i) { d[i] = pa[i] * pb[i]; });
  return y;
}

Tensor CpuBackend::scale(const Tensor& x, float s) {
  check_cpu(x, "scale");
  Tensor y = Tensor::empty(x.shape(), x.device(), x.layout());
  const float* p = x.data();
  float* d = y.data();
  parallel_for(x.storage_numel(), [=](int64_t i) { d[i] = p[i] * s; });
  return y;
}

void CpuBackend::add_inplace(const Tensor& acc, const Tensor& x_in, float alpha) {
  check_same(acc, x_in, "add_inplace");
  const Tensor x = as_layout(*this, x_in, acc.layout());
  float* d = acc.data();
  const float* p = x.data();
  parallel_for(acc.storage_numel(), [=](int64_t i) { d[i] += alpha * p[i]; });
}

Tensor CpuBackend::tanh_forward(const Tensor& x) {
  check_cpu(x, "tanh");
  Tensor y = Tensor::empty(x.shape(), x.device(), x.layout());
  const float* s = x.data();
  float* d = y.data();
  parallel_for(x.storage_numel(), [=](int64_t i) { d[i] = std::tanh(s[i]); });  // tanh(0) = 0 keeps padding zero
  return y;
}

Tensor CpuBackend::tanh_backward(const Tensor& dy_in, const Tensor& y) {
  check_same(dy_in, y, "tanh_backward");
  const Tensor dy = as_layout(*this, dy_in, y.layout());
  Tensor dx = Tensor::empty(y.shape(), y.device(), y.layout());
  const float* g = dy.data();
  const float* yy = y.data();
  float* d = dx.data();
  parallel_for(y.storage_numel(), [=](int64_t i) { d[i] = g[i] * (1.0f - yy[i] * yy[i]); });
  return dx;
}

Tensor CpuBackend::clipped_relu_forward(const Tensor& x, float ceiling) {
  check_cpu(x, "clipped_relu");
  Tensor y = Tensor::empty(x.shape(), x.device(), x.layout());
  const float* s = x.data();
  float* d = y.data();
  // 0 stays 0, so padded channels of blocked layouts stay zero.
  parallel_for(x.storage_numel(), [=](int64_t i) { d[i] = s[i] > 0.0f ? (s[i] < ceiling ? s[i] : ceiling) : 0.0f; });
  return y;
}

Tensor CpuBackend::clipped_relu_backward(const Tensor& dy_in, const Tensor& y, float ceiling) {
  check_same(dy_in, y, "clipped_relu_backward");
  const Tensor dy = as_layout(*this, dy_in, y.layout());
  Tensor dx = Tensor::empty(y.shape(), y.device(), y.layout());
  const float* g = dy.data();
  const float* yy = y.data();
  float* d = dx.data();
  parallel_for(y.storage_numel(), [=](int64_t i) { d[i] = yy[i] > 0.0f && yy[i] < ceiling ? g[i] : 0.0f; });
  return dx;
}

Tensor CpuBackend::gelu_forward(const Tensor& x) {
  check_plain(x, "gelu", "x", 0);
  Tensor y = Tensor::empty(x.shape(), x.device());
  const float* s = x.data();
  float* d = y.data();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) d[i] = 0.5f * s[i] * (1.0f + std::erf(s[i] * static_cast<float>(M_SQRT1_2)));
  return y;
}

Tensor CpuBackend::gelu_backward(const Tensor& dy, const Tensor& x) {
  check_plain(x, "gelu_backward", "x", 0);
  check_plain(dy, "gelu_backward", "dy", 0);
  if (dy.shape() != x.shape()) throw std::invalid_argument("gelu_backward: dy and x shapes differ");
  Tensor dx = Tensor::empty(x.shape(), x.device());
  const float *s = x.data(), *g = dy.data();
  float* d = dx.data();
  const int64_t n = x.numel();
  const auto inv_sqrt_2pi = static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);
#pragma omp parallel for simd if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const float cdf = 0.5f * (1.0f + std::erf(s[i] * static_cast<float>(M_SQRT1_2)));
    const float pdf = inv_sqrt_2pi * std::exp(-0.5f * s[i] * s[i]);
    d[i] = g[i] * (cdf + s[i] * pdf);
  }
  return dx;
}

Tensor CpuBackend::dropout_mask(const Shape& shape, float p, uint64_t seed) {
  if (!(p >= 0.0f && p < 1.0f)) throw std::invalid_argument("dropout: p must be in [0, 1), got " + std::to_string(p));
  Tensor m = Tensor::empty(shape, Device::cpu());
  float* d = m.data();
  const int64_t n = m.numel();
  const float keep = 1.0f / (1.0f - p);
  const uint64_t base = numerics::splitmix64(seed);
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    d[i] = numerics::dropout_value(base, i, p, keep);
  }
  return m;
}

Tensor CpuBackend::exp_forward(const Tensor& x) {
  if (!x.defined() || !x.device().is_cpu() || !x.layout().is_plain()) {
    throw std::invalid_argument("exp: needs a plain CPU tensor");
  }
  Tensor y = Tensor::empty(x.shape(), Device::cpu());
  const float* xp = x.data();
  float* yp = y.data();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < n; ++i) yp[i] = std::exp(xp[i]);
  return y;
}

}  // namespace ts::engine::cpu
