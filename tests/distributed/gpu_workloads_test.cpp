// Two of the eight workloads, data-parallel on a GPU (issue 40), against one process: resnet50
// and transformer small for a few steps, every rank on the same batches (so the mean of the
// ranks' gradients is each rank's own, and only summation order may differ), through NCCL where
// every rank has a GPU of its own (one rank on the one-GPU machine) and through the host where
// ranks share one. Each needs a GPU and skips elsewhere, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "distributed/data_parallel.h"
#include "distributed/mpi_communicator.h"
#include "distributed/nccl_rank.h"
#include "engine/device_memory.h"
#include "workloads/training_loop.h"
#include "workloads/workload.h"
#ifdef TS_HAVE_CUDA
#include "distributed/nccl_communicator.h"
#endif

namespace ts::distributed {
namespace {

using engine::Device;

constexpr int kSteps = 3;

// `steps` iterations of `name` small on `device`, its gradients averaged through `data` (none:
// one process); the parameters after them.
std::vector<std::vector<float>> train(const std::string& name, Device device, Communicator* data) {
  workloads::WorkloadConfig wc;
  wc.preset = "small";
  wc.device = device;
  wc.seed = 1;
  wc.rank = 0;  // every rank reads the same batches
  wc.world_size = 1;
  auto w = workloads::find_workload(name)->create(wc);
  workloads::LoopOptions lo;
  lo.iterations = kSteps;
  lo.warmup = 0;
  lo.device = device;
  MpiCommunicator control;
  std::unique_ptr<DataParallel> dp;
  if (data) {
    dp = std::make_unique<DataParallel>(*data, control, w->gradient_groups(), DataParallelOptions{});
    dp->broadcast_parameters();
    lo.exchange = dp.get();
  }
  const auto result = workloads::run_training(*w, lo);
  EXPECT_FALSE(result.failed) << result.error;
  std::vector<std::vector<float>> out;
  for (const auto& p : w->model().parameters()) out.push_back(p.to_vector());
  return out;
}

// Every tensor within `tolerance` of its reference, relative to the reference's largest value.
void expect_close(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                  double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << what << ", tensor " << i;
    double scale = 1e-12, diff = 0;
    for (size_t j = 0; j < got[i].size(); ++j) {
      scale = std::max(scale, std::abs(static_cast<double>(want[i][j])));
      diff = std::max(diff, std::abs(static_cast<double>(got[i][j]) - want[i][j]));
    }
    worst = std::max(worst, diff / scale);
  }
  // Summation order (and cuDNN's choice of algorithms between two builds of the model) only.
  EXPECT_LT(worst, tolerance) << what << ": largest relative difference " << worst;
}

std::string gpu_missing() {
  std::string why;
  if (!engine::device_usable(Device{engine::DeviceType::cuda, 0}, &why)) return "needs a GPU that CUDA can use: " + why;
  return "";
}

TEST(GpuWorkloads, RanksSharingAGpuTrainToTheSingleProcessParameters) {
  if (const std::string why = gpu_missing(); !why.empty()) GTEST_SKIP() << why;
  MpiCommunicator data;
  const Device gpu{engine::DeviceType::cuda, shared_gpu_for_rank(data.rank(), local_gpu_count())};
  for (const std::string name : {"resnet50", "transformer"}) {
    const auto expected = train(name, gpu, nullptr);
    expect_close(train(name, gpu, &data), expected, 1e-3, name + " through the host");
  }
}

TEST(GpuWorkloads, RanksWithAGpuEachTrainThroughNcclToTheSingleProcessParameters) {
#ifdef TS_HAVE_CUDA
  if (const std::string why = gpu_missing(); !why.empty()) GTEST_SKIP() << why;
  MpiCommunicator probe;
  if (local_gpu_count() < probe.size()) {
    GTEST_SKIP() << "needs a GPU per rank (" << probe.size() << " ranks, " << local_gpu_count() << " GPUs)";
  }
  const Device mine{engine::DeviceType::cuda, probe.rank()};
  NcclCommunicator nccl(MPI_COMM_WORLD, mine.index);
  for (const std::string name : {"resnet50", "transformer"}) {
    const auto expected = train(name, mine, nullptr);
    expect_close(train(name, mine, &nccl), expected, 1e-3, name + " through NCCL");
  }
#else
  GTEST_SKIP() << "needs a CUDA build (NCCL)";
#endif
}

}  // namespace
}  // namespace ts::distributed
