// Forward values against naive loops, layouts, primitive cache, memory categories, optimizer
// and batch-norm statistics on the CPU backend.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd.h"
#include "engine/context.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/device_memory.h"
#include "engine/device_timeline.h"
#include "engine/ops.h"
#include "memprof/ledger.h"
#include "test_util.h"

namespace ts::engine {
namespace {

using namespace testing;
using cpu::cpu_backend;

TEST(CpuBackend, BackendForDevices) {
  EXPECT_STREQ(backend_for(Device::cpu()).name(), "cpu");
  EXPECT_EQ(&backend_for(Device::cpu()), &backend_for(Device::cpu()));
  EXPECT_THROW(backend_for(Device::meta()), std::runtime_error);
#ifndef TS_HAVE_CUDA
  EXPECT_THROW(backend_for(Device{DeviceType::cuda, 0}), std::runtime_error);  // the CUDA tests cover it otherwise
#endif
}

// The device-memory interface beside backend_for: the CPU always runs work, meta never; a GPU
// either can be used or says why not (no CUDA in the build, no driver, no device), on any machine.
TEST(CpuBackend, DeviceUsableAndMemoryFor) {
  std::string why = "unchanged";
  EXPECT_TRUE(device_usable(Device::cpu(), &why));
  EXPECT_FALSE(device_usable(Device::meta(), &why));
  EXPECT_NE(why.find("shapes only"), std::string::npos) << why;
  why.clear();
  if (!device_usable(Device{DeviceType::cuda, 0}, &why)) {
    EXPECT_FALSE(why.empty());
  }
  // Host memory is the CPU backend's, and no build has a 65th GPU.
  EXPECT_THROW(memory_for(Device::cpu()), std::runtime_error);
  EXPECT_THROW(memory_for(Device{DeviceType::cuda, 64}), std::runtime_error);
#ifndef TS_HAVE_CUDA
  EXPECT_THROW(memory_for(Device{DeviceType::cuda, 0}), std::runtime_error);
#else
  EXPECT_EQ(&memory_for(Device{DeviceType::cuda, 1}), &memory_for(Device{DeviceType::cuda, 1}));
#endif
}

// The CPU's ops run as they are called: no queue to wait for, nothing to time apart from the
// host. Meta runs nothing at all.
TEST(CpuBackend, NoDeviceTimeline) {
  EXPECT_NO_THROW(synchronize(Device::cpu()));
  EXPECT_NO_THROW(synchronize(Device::meta()));
  EXPECT_EQ(make_event_pair(Device::cpu()), nullptr);
  EXPECT_EQ(make_event_pair(Device::meta()), nullptr);
#ifndef TS_HAVE_CUDA
  EXPECT_THROW(make_event_pair(Device{DeviceType::cuda, 0}), std::runtime_error);
#endif
}

TEST(CpuBackend, MemoryCategories) {
  auto& ledger = memprof::Ledger::global();
  const auto act = static_cast<size_t>(vocabulary::Category::activations);
  const auto ws = static_cast<size_t>(vocabulary::Category::workspace);
  const int64_t before = ledger.current().bytes[act];
  {
    CategoryScope scope(vocabulary::Category::activations);
    Tensor t = Tensor::empty({1000}, Device::cpu());
    EXPECT_EQ(t.category(), vocabulary::Category::activations);
    EXPECT_EQ(ledger.current().bytes[act] - before, 4000);
  }
  EXPECT_EQ(ledger.current().bytes[act], before);

  // Max pooling's workspace and a conv's temporaries (input reorder, weights reorder,
  // scratchpad) are tagged workspace.
  {
    CategoryScope scope(vocabulary::Category::activations);
    Tensor x = rand_tensor({2, 16, 8, 8}, 41, false);
    PoolResult r = backend_for(Device::cpu()).max_pool2d_forward(x, {2, 2, 2, 2, 0, 0, false});
    EXPECT_EQ(r.workspace.category(), vocabulary::Category::workspace);
    EXPECT_EQ(r.y.category(), vocabulary::Category::activations);
    ledger.reset_peak();
    Tensor w = rand_tensor({32, 16, 3, 3}, 42, false);
    Tensor y = ops::conv2d(x, w, Tensor(), conv_params(1, 1));  // plain C=16 input: reordered
    EXPECT_GT(ledger.peak().bytes[ws], 0);
    EXPECT_EQ(y.category(), vocabulary::Category::activations);
  }
}

TEST(CpuBackend, BackwardGradientsInRightCategoriesAndLayouts) {
  Tensor x = rand_tensor({2, 16, 6, 6}, 50);
  Tensor w = rand_tensor({16, 16, 3, 3}, 51);
  Tensor y = ops::conv2d(ops::to_layout(x, Layout::blocked(8)), w, Tensor(), conv_params(1, 1));
  ops::mean(ops::relu(y)).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().category(), vocabulary::Category::weight_grads);
  EXPECT_TRUE(w.grad().layout().is_plain());
  EXPECT_EQ(x.grad().layout(), Layout::plain());
}

}  // namespace
}  // namespace ts::engine
