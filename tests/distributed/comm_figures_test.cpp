// nccl-tests' bandwidth definitions and the per-size summary.
#include <gtest/gtest.h>

#include "distributed/collective_bench.h"
#include "distributed/comm_figures.h"

namespace ts::distributed {
namespace {

TEST(CommFigures, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::reduce_scatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::broadcast, 8), 1.0);
  // 1 GB in 1 s: algbw 1 GB/s; all-reduce on 4 ranks moves 1.5x that over each link.
  EXPECT_DOUBLE_EQ(algbw_gbps(1'000'000'000, 1'000'000'000), 1.0);
  EXPECT_DOUBLE_EQ(busbw_gbps(Collective::all_reduce, 4, 1'000'000'000, 1'000'000'000), 1.5);
  EXPECT_DOUBLE_EQ(algbw_gbps(10, 0), 0.0);
}

TEST(CommFigures, SummariesGroupByCollectiveAndSize) {
  std::vector<CollectiveRecord> r = {
      {Collective::all_reduce, "a", 1000, 0, 100, 0, 0},
      {Collective::all_reduce, "b", 1000, 200, 500, 0, 0},
      {Collective::all_reduce, "c", 8, 0, 10, 0, 0},
      {Collective::broadcast, "p", 1000, 0, 50, -1, 0},
  };
  const auto s = summarise(r, 2);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].collective, Collective::all_reduce);
  EXPECT_EQ(s[0].bytes, 8);
  EXPECT_EQ(s[1].bytes, 1000);
  EXPECT_EQ(s[1].count, 2);
  EXPECT_EQ(s[1].total_ns, 400);
  EXPECT_EQ(s[1].min_ns, 100);
  EXPECT_EQ(s[1].max_ns, 300);
  EXPECT_DOUBLE_EQ(s[1].mean_ns, 200);
  EXPECT_DOUBLE_EQ(s[1].algbw_gbps, 5.0);
  EXPECT_DOUBLE_EQ(s[1].busbw_gbps, 5.0);  // 2 ranks: factor 1
  EXPECT_EQ(s[2].collective, Collective::broadcast);
}

}  // namespace
}  // namespace ts::distributed

namespace ts::distributed {
namespace {

TEST(SweepSizes, GeometricFromMinToMaxInclusive) {
  EXPECT_EQ(sweep_sizes(8, 64, 2), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(sweep_sizes(8, 100, 2), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(sweep_sizes(5, 5, 2), (std::vector<int64_t>{5}));
  EXPECT_EQ(sweep_sizes(1, int64_t{1} << 62, 1 << 30).size(), 3u);  // no overflow past max
  EXPECT_THROW(sweep_sizes(0, 8, 2), std::invalid_argument);
  EXPECT_THROW(sweep_sizes(16, 8, 2), std::invalid_argument);
  EXPECT_THROW(sweep_sizes(8, 16, 1), std::invalid_argument);
}

}  // namespace
}  // namespace ts::distributed
