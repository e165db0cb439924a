// Which GPU a rank of a GPU job takes, and the refusal where a host has fewer GPUs than ranks
// (NCCL's "Duplicate GPU"), decided before NCCL is called.
#include "distributed/gpu_assignment.h"

#include <gtest/gtest.h>

namespace ts::distributed {
namespace {

TEST(GpuAssignment, EachLocalRankTakesTheGpuOfItsIndex) {
  for (int r = 0; r < 4; ++r) {
    const GpuAssignment a = gpu_for_rank(r, 4, 8);
    EXPECT_FALSE(a.refused()) << a.refusal;
    EXPECT_EQ(a.device, r);
  }
}

TEST(GpuAssignment, TwoRanksOnOneGpuAreRefusedWithWhatToDo) {
  for (int r = 0; r < 2; ++r) {
    const GpuAssignment a = gpu_for_rank(r, 2, 1);
    ASSERT_TRUE(a.refused());
    EXPECT_EQ(a.device, -1);
    EXPECT_NE(a.refusal.find("2 ranks on a host with 1 GPU"), std::string::npos) << a.refusal;
    EXPECT_NE(a.refusal.find("Duplicate GPU"), std::string::npos) << a.refusal;
    EXPECT_NE(a.refusal.find("--backend mpi"), std::string::npos) << a.refusal;
  }
}

TEST(GpuAssignment, AHostWithoutGpusIsRefused) {
  const GpuAssignment a = gpu_for_rank(0, 1, 0);
  ASSERT_TRUE(a.refused());
  EXPECT_NE(a.refusal.find("none"), std::string::npos) << a.refusal;
}

TEST(GpuAssignment, ALocalRankOutsideItsHostIsRefused) {
  EXPECT_TRUE(gpu_for_rank(2, 2, 4).refused());
  EXPECT_TRUE(gpu_for_rank(-1, 2, 4).refused());
  EXPECT_TRUE(gpu_for_rank(0, 0, 4).refused());
}

// The host-staged path lets ranks share GPUs: a host's ranks spread over its GPUs in turn.
TEST(GpuAssignment, RanksSharingGpusSpreadOverThemInTurn) {
  EXPECT_EQ(shared_gpu_for_rank(0, 1), 0);
  EXPECT_EQ(shared_gpu_for_rank(3, 1), 0);
  EXPECT_EQ(shared_gpu_for_rank(3, 2), 1);
  EXPECT_EQ(shared_gpu_for_rank(4, 8), 4);
  EXPECT_EQ(shared_gpu_for_rank(0, 0), -1);
  EXPECT_EQ(shared_gpu_for_rank(-1, 2), -1);
}

TEST(GpuAssignment, ALaunchPlanFitsOrSaysWhy) {
  EXPECT_EQ(gpus_too_few(1, 1), "");
  EXPECT_EQ(gpus_too_few(8, 8), "");
  EXPECT_NE(gpus_too_few(3, 2).find("at most 2 ranks per host"), std::string::npos) << gpus_too_few(3, 2);
}

}  // namespace
}  // namespace ts::distributed
