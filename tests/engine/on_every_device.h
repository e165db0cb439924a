#pragma once
// One test body run on every device: the CPU and the first GPU (the GPU case skips, saying why,
// where this build or machine has none). A family's test file declares
//
//   class ConvOps : public OnDevice {};
//   TEST_P(ConvOps, Conv2dConfigs) { ... }
//   TS_ON_EVERY_DEVICE(ConvOps);
//
// and ctest lists two cases of each: Device/ConvOps.Conv2dConfigs/cpu and .../cuda0 (label gpu).
// Inputs are made on the CPU as in any test; on(x) puts one on the device under test, and the
// fixture's gradcheck / gradgradcheck run the checked function there (its inputs and result
// cross differentiably), so the finite differences check that device's backward. On the CPU
// both are the identity: the CPU case is exactly the plain test.
#include <gtest/gtest.h>

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/gradcheck.h"
#include "engine/tensor.h"

namespace ts::engine {
// gtest prints a case's parameter when it fails.
void PrintTo(const Device& d, std::ostream* os);
}  // namespace ts::engine

namespace ts::engine::testing {

// A copy on `device` (plain layout), through the host; no autograd history.
Tensor copy_to(const Tensor& x, Device device);
// The same, recorded for autograd: its backward copies the gradient back to x's device.
Tensor transfer(const Tensor& x, Device device);
// x on `device`, differentiably: x itself where it already is there (or undefined).
Tensor transferred(const Tensor& x, Device device);
// Each of xs so.
std::vector<Tensor> transferred_each(const std::vector<Tensor>& xs, Device device);
// f run on `device`: its inputs are transferred there and its result back to the CPU, both
// differentiably (the gradient checker takes and gives CPU tensors).
GradFn on_device(GradFn f, Device device);

class OnDevice : public ::testing::TestWithParam<Device> {
 protected:
  // Skips with the reason when the device cannot be used; turns TF32 off on a GPU, so that its
  // fp32 convolutions and GEMMs meet the CPU's fp32 tolerances.
  void SetUp() override;

  Device device() const { return GetParam(); }
  // x on the device under test, differentiably (x itself on the CPU).
  Tensor on(const Tensor& x) const { return transferred(x, device()); }
  std::vector<Tensor> on_each(const std::vector<Tensor>& xs) const { return transferred_each(xs, device()); }
  GradcheckResult gradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradcheckOptions& o = {}) const;
  GradcheckResult gradgradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradcheckOptions& o = {}) const;

 private:
  std::shared_ptr<void> tf32_off_;
};

// "cpu", "cuda0": the case's name in ctest.
std::string device_case_name(const ::testing::TestParamInfo<Device>& info);

}  // namespace ts::engine::testing

#define TS_ON_EVERY_DEVICE(Suite)                                                                              \
  INSTANTIATE_TEST_SUITE_P(                                                                                    \
      Device, Suite,                                                                                           \
      ::testing::Values(::ts::engine::Device::cpu(), ::ts::engine::Device{::ts::engine::DeviceType::cuda, 0}), \
      ::ts::engine::testing::device_case_name)
