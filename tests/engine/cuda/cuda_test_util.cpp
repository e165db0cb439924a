#include "cuda_test_util.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "../test_util.h"

namespace ts::engine::testing {

::testing::AssertionResult close_to_cpu(const Tensor& g, const Tensor& c, double tol) {
  if (!g.defined() || !c.defined()) {
    return ::testing::AssertionFailure() << "undefined result (gpu " << g.defined() << ", cpu " << c.defined() << ")";
  }
  if (g.device().type != DeviceType::cuda) return ::testing::AssertionFailure() << "result on " << g.device().str();
  if (g.shape() != c.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(g.shape()) << " vs cpu " << shape_str(c.shape());
  }
  const auto gv = g.to_vector(), cv = c.to_vector();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < gv.size(); ++i) {
    const double d = std::abs(static_cast<double>(gv[i]) - cv[i]) / (1.0 + std::abs(static_cast<double>(cv[i])));
    if (std::isnan(d)) {
      worst = INFINITY;
      at = i;
      break;
    }
    if (d > worst) {
      worst = d;
      at = i;
    }
  }
  if (worst < tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "max |gpu - cpu| / (1 + |cpu|) = " << worst << " >= " << tol << " at element "
                                       << at << " (gpu " << gv[at] << ", cpu " << cv[at] << ") of "
                                       << shape_str(g.shape());
}

::testing::AssertionResult same_bits(const Tensor& g, const Tensor& c) {
  if (!g.defined() || !c.defined()) return ::testing::AssertionFailure() << "undefined result";
  if (g.device().type != DeviceType::cuda) return ::testing::AssertionFailure() << "result on " << g.device().str();
  if (g.shape() != c.shape() || !(g.layout() == c.layout())) {
    return ::testing::AssertionFailure() << shape_str(g.shape()) << " " << g.layout().str() << " vs cpu "
                                         << shape_str(c.shape()) << " " << c.layout().str();
  }
  const auto gv = g.to_vector(), cv = c.to_vector();
  for (size_t i = 0; i < gv.size(); ++i) {
    if (std::memcmp(&gv[i], &cv[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << " of " << shape_str(g.shape()) << ": gpu " << gv[i] << ", cpu " << cv[i];
    }
  }
  return ::testing::AssertionSuccess();
}

Tensor rnd(const Shape& s, uint64_t seed, float lo, float hi) { return rand_tensor(s, seed, false, lo, hi); }

Tensor up(const Tensor& t) { return t.defined() ? copy_to(t, gpu()) : Tensor(); }

Tensor in_layout_gpu(const Tensor& cpu_tensor, const Layout& l) { return gpu_be().to_layout(up(cpu_tensor), l); }

std::string invalid_argument_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument)";
}

}  // namespace ts::engine::testing
