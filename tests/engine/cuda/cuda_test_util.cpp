#include "cuda_test_util.h"

#include <cmath>
#include <memory>
#include <sstream>
#include <utility>

#include "../test_util.h"
#include "engine/autograd.h"

namespace ts::engine::testing {

Tensor copy_to(const Tensor& x, Device device) { return Tensor::from_vector(x.shape(), x.to_vector(), device); }

namespace {

struct ToDeviceBackward : Node {
  Device from;
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {transfer(g[0], from)}; }
  std::string name() const override { return "ToDeviceBackward"; }
};

}  // namespace

Tensor transfer(const Tensor& x, Device device) {
  Tensor y = copy_to(x, device);
  if (needs_grad({&x})) {
    auto n = std::make_shared<ToDeviceBackward>();
    n->from = x.device();
    connect(n, {&x}, {&y});
  }
  return y;
}

GradFn on_gpu(GradFn f) {
  return [f = std::move(f)](const std::vector<Tensor>& in) {
    std::vector<Tensor> g;
    for (const auto& t : in) g.push_back(t.defined() ? transfer(t, gpu()) : Tensor());
    return transfer(f(g), Device::cpu());
  };
}

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

}  // namespace ts::engine::testing
