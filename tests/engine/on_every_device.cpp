#include "on_every_device.h"

#include <memory>
#include <ostream>
#include <string>
#include <utility>

#include "engine/autograd.h"
#include "engine/device_memory.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/device_memory.h"
#endif

namespace ts::engine {

void PrintTo(const Device& d, std::ostream* os) { *os << d.str(); }

namespace testing {

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

Tensor transferred(const Tensor& x, Device device) {
  return !x.defined() || x.device() == device ? x : transfer(x, device);
}

std::vector<Tensor> transferred_each(const std::vector<Tensor>& xs, Device device) {
  std::vector<Tensor> out;
  for (const auto& x : xs) out.push_back(transferred(x, device));
  return out;
}

GradFn on_device(GradFn f, Device device) {
  return [f = std::move(f), device](const std::vector<Tensor>& in) {
    return transfer(f(transferred_each(in, device)), Device::cpu());
  };
}

void OnDevice::SetUp() {
  std::string why;
  if (!device_usable(device(), &why)) GTEST_SKIP() << device().str() << " is not usable (" << why << "): skipped";
#ifdef TS_HAVE_CUDA
  if (device().type == DeviceType::cuda) tf32_off_ = std::make_shared<cuda::Tf32Scope>(false);
#endif
}

GradcheckResult OnDevice::gradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradcheckOptions& o) const {
  return engine::gradcheck(device().is_cpu() ? f : on_device(f, device()), std::move(inputs), o);
}

GradcheckResult OnDevice::gradgradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradcheckOptions& o) const {
  return engine::gradgradcheck(device().is_cpu() ? f : on_device(f, device()), std::move(inputs), o);
}

std::string device_case_name(const ::testing::TestParamInfo<Device>& info) {
  std::string name = info.param.str();
  std::erase(name, ':');
  return name;
}

}  // namespace testing
}  // namespace ts::engine
