// The CUDA device plumbing: backend_for, tensors on the device (host copies, zeros, full), the
// caching allocator behind Storage (reuse, reserved/used, the memory ledger's categories),
// the out-of-memory error, the TF32 switch, and what happens on a machine without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "../test_util.h"
#include "cuda_test_util.h"
#include "engine/context.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/device_timeline.h"
#include "engine/ops.h"
#include "memprof/ledger.h"

namespace ts::engine {
namespace {

using namespace testing;

// Not a Cuda* suite: a test of machines without a GPU, in the CPU's suite (ctest -LE gpu).
TEST(NoCudaDevice, ErrorsSayWhy) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  try {
    backend_for(gpu());
    FAIL() << "expected runtime_error";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cuda:0"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaGetDeviceCount"), std::string::npos) << m;
  }
  EXPECT_THROW(Tensor::empty({4}, gpu()), std::runtime_error);
  std::string why;
  EXPECT_FALSE(cuda::device_usable(0, &why));
  EXPECT_FALSE(why.empty());
}

TEST(CudaDevice, Tf32Switch) {
  const bool before = cuda::tf32_allowed();
  {
    cuda::Tf32Scope off(false);
    EXPECT_FALSE(cuda::tf32_allowed());
    {
      cuda::Tf32Scope on(true);
      EXPECT_TRUE(cuda::tf32_allowed());
    }
    EXPECT_FALSE(cuda::tf32_allowed());
  }
  EXPECT_EQ(cuda::tf32_allowed(), before);
}

using CudaDeviceTest = CudaTest;

TEST_F(CudaDeviceTest, BackendForAndHostCopies) {
  Backend& be = backend_for(gpu());
  EXPECT_STREQ(be.name(), "cuda");
  EXPECT_EQ(&be, &backend_for(gpu()));
  EXPECT_EQ(&be, &backend_of(Tensor::empty({1}, gpu())));
  const int n = cuda::device_count();
  try {
    backend_for(Device{DeviceType::cuda, n});
    FAIL() << "expected runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:" + std::to_string(n)), std::string::npos) << e.what();
  }

  const std::vector<float> v{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  Tensor t = Tensor::from_vector({2, 3}, v, gpu());
  EXPECT_EQ(t.device(), gpu());
  EXPECT_EQ(t.to_vector(), v);
  EXPECT_EQ(Tensor::from_vector({1}, {4.5f}, gpu()).item(), 4.5f);
  for (float z : Tensor::zeros({3, 7}, gpu()).to_vector()) EXPECT_EQ(z, 0.0f);
  for (float f : Tensor::full({5}, -3.0f, gpu()).to_vector()) EXPECT_EQ(f, -3.0f);
  // A view shares the storage and reads from its offset.
  EXPECT_EQ(t.view({3, 2}).to_vector(), v);
  // An op on the GPU, read back.
  EXPECT_EQ(ops::relu(t).to_vector(), (std::vector<float>{1.5f, 0.0f, 3.25f, 0.0f, 7.0f, 0.0f}));
}

TEST_F(CudaDeviceTest, AllocatorReusesBlocksAndReportsToTheLedger) {
  auto& alloc = cuda::device_allocator(0);
  auto& ledger = memprof::Ledger::global();
  const auto act = static_cast<size_t>(vocabulary::Category::activations);
  const int64_t before = ledger.current().bytes[act];
  void* first = nullptr;
  {
    CategoryScope scope(vocabulary::Category::activations);
    Tensor t = Tensor::empty({1 << 20}, gpu());
    first = t.data();
    EXPECT_EQ(t.category(), vocabulary::Category::activations);
    EXPECT_EQ(ledger.current().bytes[act] - before, 4 << 20);
    const cuda::AllocatorStats s = alloc.stats();
    EXPECT_GE(s.reserved_bytes, s.used_bytes);
    EXPECT_GE(s.used_bytes, 4 << 20);
  }
  EXPECT_EQ(ledger.current().bytes[act], before);
  const cuda::AllocatorStats s0 = alloc.stats();
  {
    Tensor again = Tensor::empty({1 << 20}, gpu());
    EXPECT_EQ(again.data(), first);  // the cached block, same stream
  }
  const cuda::AllocatorStats s1 = alloc.stats();
  EXPECT_EQ(s1.cache_hits - s0.cache_hits, 1);
  EXPECT_EQ(s1.device_mallocs, s0.device_mallocs);
  EXPECT_GE(s1.peak_reserved_bytes, s1.reserved_bytes);
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().reserved_bytes, alloc.stats().used_bytes);
}

TEST_F(CudaDeviceTest, ConvolutionWorkspaceIsCategorised) {
  auto& ledger = memprof::Ledger::global();
  const auto ws = static_cast<size_t>(vocabulary::Category::workspace);
  CategoryScope scope(vocabulary::Category::activations);
  Tensor x = copy_to(rand_tensor({4, 16, 20, 20}, 1, false), gpu());
  Tensor w = copy_to(rand_tensor({24, 16, 3, 3}, 2, false), gpu());
  ledger.reset_peak();
  Tensor y = ops::conv2d(x, w, Tensor(), conv_params(1, 1));  // a new shape: the algorithm search runs
  EXPECT_GT(ledger.peak().bytes[ws], 0);
  EXPECT_EQ(y.category(), vocabulary::Category::activations);
  PoolResult r = backend_for(gpu()).max_pool2d_forward(y, {2, 2, 2, 2, 0, 0, false});
  EXPECT_EQ(r.workspace.category(), vocabulary::Category::workspace);
  EXPECT_EQ(r.y.category(), vocabulary::Category::activations);
}

// An event pair brackets the work queued on the engine's stream between its two records; it is
// read after a synchronize, and the same pair times again when recorded again.
TEST_F(CudaDeviceTest, EventPairTimesQueuedWork) {
  auto pair = make_event_pair(gpu());
  ASSERT_NE(pair, nullptr);
  EXPECT_THROW(pair->elapsed_ns(), std::runtime_error);  // never recorded
  Tensor x = Tensor::empty({64, 1024, 1024}, gpu());     // 256 MiB: a fill of it takes a while
  for (int round = 0; round < 2; ++round) {
    pair->begin();
    backend_for(gpu()).fill(x, 1.0f + static_cast<float>(round));
    pair->end();
    synchronize(gpu());
    EXPECT_GT(pair->elapsed_ns(), 1000) << "round " << round;  // 256 MiB at even 10 TB/s is 27 us
  }
}

TEST_F(CudaDeviceTest, OutOfMemoryNamesTheRequestAndTheBreakdown) {
  const std::string owner = "layer3.2.conv2";
  OwnerScope os(&owner, 0);
  CategoryScope scope(vocabulary::Category::activations);
  // 4 PiB: more than any GPU has.
  try {
    Tensor t = Tensor::empty({int64_t{1} << 50}, gpu());
    FAIL() << "expected OutOfMemoryError";
  } catch (const cuda::OutOfMemoryError& e) {
    const std::string m = e.what();
    for (const char* want : {"out of memory on cuda:0", "4503599627370496 bytes", "category activations",
                             "layer3.2.conv2", "Live tensors by category", "reserved", "used", "free of"}) {
      EXPECT_NE(m.find(want), std::string::npos) << "missing '" << want << "' in: " << m;
    }
  }
  // The device still works afterwards.
  EXPECT_EQ(Tensor::full({2}, 1.0f, gpu()).to_vector(), (std::vector<float>{1.0f, 1.0f}));
}

}  // namespace
}  // namespace ts::engine
