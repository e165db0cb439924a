// Which GPU a rank of a GPU job takes, and the refusal where a host has fewer GPUs than ranks
// (NCCL's "Duplicate GPU"), decided before NCCL is called.
#include "distributed/gpu_assignment.h"

#include <gtest/gtest.h>

#include "distributed/error.h"

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
    EXPECT_NE(a.refusal.find("at most 1 rank per host"), std::string::npos) << a.refusal;
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

// cuda:N names one GPU for the host's ranks: NCCL takes it only where the host runs one rank.
TEST(GpuAssignment, ANamedGpuServesNcclOnlyForOneRankPerHost) {
  EXPECT_EQ(nccl_gpu_for_rank(0, 1, 4, 2).device, 2);
  const GpuAssignment shared = nccl_gpu_for_rank(1, 2, 4, 2);
  ASSERT_TRUE(shared.refused());
  EXPECT_NE(shared.refusal.find("cuda:2 puts this host's 2 ranks on one GPU"), std::string::npos) << shared.refusal;
  EXPECT_TRUE(nccl_gpu_for_rank(0, 1, 2, 3).refused());  // no GPU 3 here
  EXPECT_EQ(nccl_gpu_for_rank(1, 2, 2, -1).device, 1);   // none named: local rank's
}

TEST(GpuAssignment, GpuGradientsNameTheirRoute) {
  for (const auto g : {GpuGradients::automatic, GpuGradients::nccl, GpuGradients::host})
    EXPECT_EQ(parse_gpu_gradients(to_string(g)), g);
  EXPECT_EQ(parse_gpu_gradients("automatic"), std::nullopt);
  EXPECT_EQ(parse_gpu_gradients("NCCL"), std::nullopt);
}

// auto takes NCCL where every rank can, the host where one cannot (saying why); nccl forced where
// it cannot work is refused with what to do instead; host is taken as asked.
TEST(GpuAssignment, TheGradientsRouteFollowsWhatTheRanksCanDo) {
  const std::string refusal = "rank 1: 2 ranks on a host with 1 GPU: NCCL takes one GPU per rank";
  EXPECT_TRUE(route_gpu_gradients(GpuGradients::automatic, "").nccl);
  EXPECT_TRUE(route_gpu_gradients(GpuGradients::nccl, "").nccl);
  const GradientRoute fallback = route_gpu_gradients(GpuGradients::automatic, refusal);
  EXPECT_FALSE(fallback.nccl);
  EXPECT_NE(fallback.why.find("through the host"), std::string::npos) << fallback.why;
  EXPECT_NE(fallback.why.find(refusal), std::string::npos) << fallback.why;
  try {
    route_gpu_gradients(GpuGradients::nccl, refusal);
    ADD_FAILURE() << "nccl was taken where a rank cannot use it";
  } catch (const DistError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(refusal), std::string::npos) << what;
    EXPECT_NE(what.find("--gpu-gradients host"), std::string::npos) << what;
  }
  EXPECT_FALSE(route_gpu_gradients(GpuGradients::host, "").nccl);
  EXPECT_FALSE(route_gpu_gradients(GpuGradients::host, refusal).nccl);
}

}  // namespace
}  // namespace ts::distributed
