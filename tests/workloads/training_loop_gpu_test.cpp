// The training loop on a GPU (label gpu; skips with the reason where no CUDA device is usable):
// an iteration ends when the device has run its work, its device time comes from CUDA events
// around it on the engine's stream and fits inside its host span, the phases' device times fit
// inside the iteration's, and no convolution algorithm is searched in a timed iteration.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/device_memory.h"
#include "workloads/gpu_metric_names.h"
#include "workloads/training_loop.h"
#include "workloads/workload.h"

using namespace ts;
using namespace ts::workloads;

namespace {

// cudaEventElapsedTime's resolution ("around 0.5 microseconds"), at each of a pair's two ends.
constexpr double kEventResolutionNs = 1000;

class TrainingLoopGpu : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string why;
    if (!engine::device_usable(kGpu, &why)) GTEST_SKIP() << why << ": GPU test skipped";
  }
  static constexpr engine::Device kGpu{engine::DeviceType::cuda, 0};
};

// resnet50: one phase of each per iteration; wgan: five critic steps and a generator step, so
// six runs of each phase summed.
TEST_P(TrainingLoopGpu, IterationsCarryTheirDeviceTime) {
  WorkloadConfig wc;
  wc.preset = "tiny";
  wc.batch = 4;
  wc.device = kGpu;
  auto w = find_workload(GetParam())->create(wc);
  LoopOptions o;
  o.warmup = 1;
  o.iterations = 2;
  o.device = kGpu;
  const LoopResult r = run_training(*w, o);
  ASSERT_FALSE(r.failed) << r.error;
  ASSERT_EQ(r.iterations.size(), 3u);
  for (const auto& it : r.iterations) {
    SCOPED_TRACE("iteration " + std::to_string(it.index));
    EXPECT_GT(it.device_ns, 0);
    EXPECT_LE(it.device_ns, it.end_ns - it.start_ns);
    std::map<std::string, double> m;
    for (const auto& x : it.metrics) m[x.name] = x.value;
    ASSERT_TRUE(m.contains(kGpuEventNs));
    EXPECT_EQ(m[kGpuEventNs], static_cast<double>(it.device_ns));
    double phases = 0;
    for (const char* name : {kGpuEventDataNs, kGpuEventForwardNs, kGpuEventBackwardNs, kGpuEventOptimizerNs}) {
      ASSERT_TRUE(m.contains(name)) << name;
      EXPECT_GE(m[name], 0) << name;
      phases += m[name];
    }
    EXPECT_GT(m[kGpuEventForwardNs], 0);
    EXPECT_GT(m[kGpuEventBackwardNs], 0);
    // wgan's 24 phase pairs: up to 24 resolution steps over the sum.
    EXPECT_LE(phases, static_cast<double>(it.device_ns) + 24 * kEventResolutionNs);
  }
  std::map<std::string, double> run;
  for (const auto& x : r.metrics) run[x.name] = x.value;
  ASSERT_TRUE(run.contains(kGpuConvPlansSearched));
  ASSERT_TRUE(run.contains(kGpuConvPlansHeuristic));
  ASSERT_TRUE(run.contains(kGpuConvSearchesTimed));
  EXPECT_GT(run[kGpuConvPlansSearched] + run[kGpuConvPlansHeuristic], 0);  // both models convolve
  EXPECT_EQ(run[kGpuConvSearchesTimed], 0);
}

INSTANTIATE_TEST_SUITE_P(Workloads, TrainingLoopGpu, ::testing::Values("resnet50", "wgan"));

}  // namespace
