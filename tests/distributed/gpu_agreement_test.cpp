// GPU ranks agree before NCCL is called: when any rank's GPU was refused (two ranks on one GPU,
// none at all), every rank stops with that rank's reason instead of some waiting in NCCL's
// initialisation for the others.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "distributed/error.h"
#include "distributed/nccl_rank.h"

namespace ts::distributed {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

TEST(GpuAgreement, NoRefusalLetsEveryRankOn) {
  GpuAssignment mine;
  mine.device = world_rank();
  EXPECT_NO_THROW(agree_on_gpus(MPI_COMM_WORLD, mine));
}

TEST(GpuAgreement, OneRefusedRankStopsEveryRankWithItsReason) {
  const int refused = world_size() - 1;  // the last rank: its reason must reach rank 0 too
  GpuAssignment mine;
  if (world_rank() == refused) {
    mine.refusal = "2 ranks on a host with 1 GPU (rank " + std::to_string(refused) + "'s own words)";
  } else {
    mine.device = 0;
  }
  try {
    agree_on_gpus(MPI_COMM_WORLD, mine);
    FAIL() << "rank " << world_rank() << " went on although rank " << refused << " was refused";
  } catch (const DistError& e) {
    EXPECT_EQ(std::string(e.what()), "rank " + std::to_string(refused) + ": 2 ranks on a host with 1 GPU (rank " +
                                         std::to_string(refused) + "'s own words)");
  }
}

TEST(GpuAgreement, TheFirstRefusedRankIsNamed) {
  GpuAssignment mine;  // every rank refused
  mine.refusal = "rank " + std::to_string(world_rank()) + " has none";
  try {
    agree_on_gpus(MPI_COMM_WORLD, mine);
    FAIL() << "expected DistError";
  } catch (const DistError& e) {
    EXPECT_EQ(std::string(e.what()), "rank 0: rank 0 has none");
  }
}

}  // namespace
}  // namespace ts::distributed
