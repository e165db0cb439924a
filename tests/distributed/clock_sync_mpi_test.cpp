// The clock offsets measured between real ranks (distributed/clock_sync.h). Under plain ctest the
// ranks share this machine's clock: every offset is 0 within its bound. DistMpi.clock_skew starts
// each rank with its clock moved (TS_CLOCK_SKEW_NS, vocabulary/clock.h) and tells every rank all
// the moves (TS_TEST_CLOCK_SKEWS): each measured offset must hold the true one within its bound.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "distributed/clock_sync.h"

namespace ts::distributed {
namespace {

std::vector<int64_t> injected_skews(int ranks) {
  std::vector<int64_t> skews(static_cast<size_t>(ranks), 0);
  if (const char* text = std::getenv("TS_TEST_CLOCK_SKEWS")) {
    std::stringstream in(text);
    std::string item;
    for (size_t r = 0; r < skews.size() && std::getline(in, item, ','); ++r) skews[r] = std::stoll(item);
  }
  return skews;
}

TEST(ClockSync, EveryRanksOffsetToRankZeroIsMeasuredWithinItsBound) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::vector<ClockOffset> offsets = measure_clock_offsets(MPI_COMM_WORLD, 32);
  if (rank != 0) {
    EXPECT_TRUE(offsets.empty());
    return;
  }
  ASSERT_EQ(offsets.size(), static_cast<size_t>(size));
  const auto skews = injected_skews(size);
  EXPECT_EQ(offsets[0].offset_ns, 0);
  for (int r = 1; r < size; ++r) {
    const ClockOffset& o = offsets[static_cast<size_t>(r)];
    const int64_t truth = skews[static_cast<size_t>(r)] - skews[0];
    EXPECT_EQ(o.pings, 32) << "rank " << r;
    EXPECT_LE(std::llabs(o.offset_ns - truth), o.uncertainty_ns)
        << "rank " << r << ": measured " << o.offset_ns << " +- " << o.uncertainty_ns << ", true " << truth;
    // On one machine a round trip takes microseconds; a busy machine may stretch the fastest of
    // 32 to milliseconds, never to a second.
    EXPECT_LT(o.uncertainty_ns, 50'000'000) << "rank " << r;
  }
}

}  // namespace
}  // namespace ts::distributed
