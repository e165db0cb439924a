// The softmax family on the CPU: log-softmax over rows (A3C's policy), plain loops, OpenMP over
// rows when there are many. Rows are short (one per state, K = the game's actions), so each row is
// done by one thread in double precision for the normaliser.
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/cpu/cpu_common.h"

namespace ts::engine::cpu {

namespace {

void check_plain_2d(const Tensor& t, const char* op) {
  if (!t.defined() || !t.device().is_cpu() || !t.layout().is_plain() || t.dim() != 2) {
    throw std::invalid_argument(std::string(op) + ": needs a plain 2-D CPU tensor");
  }
}

}  // namespace

Tensor CpuBackend::log_softmax_forward(const Tensor& x) {
  check_plain_2d(x, "log_softmax");
  const int64_t m = x.size(0), k = x.size(1);
  Tensor y = Tensor::empty(x.shape(), Device::cpu());
  const float* xp = x.data();
  float* yp = y.data();
#pragma omp parallel for if (m * k > kParallelThreshold)
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = xp + r * k;
    float* yr = yp + r * k;
    float mx = xr[0];
    for (int64_t j = 1; j < k; ++j) mx = std::max(mx, xr[j]);
    double s = 0;
    for (int64_t j = 0; j < k; ++j) s += std::exp(static_cast<double>(xr[j] - mx));
    const auto lse = static_cast<float>(static_cast<double>(mx) + std::log(s));
    for (int64_t j = 0; j < k; ++j) yr[j] = xr[j] - lse;
  }
  return y;
}

Tensor CpuBackend::log_softmax_backward(const Tensor& dy, const Tensor& y) {
  check_plain_2d(dy, "log_softmax_backward");
  check_plain_2d(y, "log_softmax_backward");
  if (dy.shape() != y.shape()) throw std::invalid_argument("log_softmax_backward: dy and y differ in shape");
  const int64_t m = y.size(0), k = y.size(1);
  Tensor dx = Tensor::empty(y.shape(), Device::cpu());
  const float* dyp = dy.data();
  const float* yp = y.data();
  float* dxp = dx.data();
#pragma omp parallel for if (m * k > kParallelThreshold)
  for (int64_t r = 0; r < m; ++r) {
    double s = 0;
    for (int64_t j = 0; j < k; ++j) s += dyp[r * k + j];
    for (int64_t j = 0; j < k; ++j) {
      dxp[r * k + j] = dyp[r * k + j] - std::exp(yp[r * k + j]) * static_cast<float>(s);
    }
  }
  return dx;
}

}  // namespace ts::engine::cpu
