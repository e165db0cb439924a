// The reduction family on the CPU: the sum of every element and the sum of squares (gradient
// clipping's norm), in double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/cpu_common.h"

namespace ts::engine::cpu {

Tensor CpuBackend::sum_all(const Tensor& x) {
  check_cpu(x, "sum");
  // Padded channels are zero, so the storage sum is the logical sum.
  const float* p = x.data();
  const int64_t n = x.storage_numel();
  double total = 0.0;
#pragma omp parallel for reduction(+ : total) if (n > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < n; ++i) total += p[i];
  Tensor y = Tensor::empty({1}, x.device());
  y.data()[0] = static_cast<float>(total);
  return y;
}

Tensor CpuBackend::sum_squares(const Tensor& x) {
  if (!x.defined() || !x.device().is_cpu()) throw std::invalid_argument("sum_squares: needs a CPU tensor");
  // Padded channels of blocked layouts are zero, so the storage sum is the logical one.
  const float* p = x.data();
  const int64_t n = x.storage_numel();
  double total = 0;
#pragma omp parallel for reduction(+ : total) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) total += static_cast<double>(p[i]) * p[i];
  Tensor y = Tensor::empty({1}, x.device());
  y.data()[0] = static_cast<float>(total);
  return y;
}

}  // namespace ts::engine::cpu
