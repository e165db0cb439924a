// The spread of a collectives benchmark's calls (reports/bench_spread.h) on known calls: the
// percentiles of the calls' times (each the longest of its ranks'), per call the rank that took
// longest and the one that came in last, and the spikes, worked out by hand below.
#include "reports/bench_spread.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace ts::reports {
namespace {

using store::CollectiveBenchSamplesRow;

// Rank 1 listed first: ranks are placed by their number, not their order.
const std::vector<CollectiveBenchSamplesRow> kTwoRanks = {
    {"all_reduce", 1024, 1, {150, 250, 350, 450, 500}},
    {"all_reduce", 1024, 0, {100, 200, 300, 400, 2000}},
};

TEST(BenchSpread, PercentilesStragglersAndSpikesOfKnownCalls) {
  const BenchSpread s = bench_spread(kTwoRanks);
  EXPECT_EQ(s.samples, 10);
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.calls, 5);
  // The calls' times, each its slowest rank's: 150 250 350 450 2000. p50 at index 2 -> 350; p99 at
  // 3.96 -> 450 + 0.96 x (2000 - 450) = 1938 (numpy.quantile's default).
  EXPECT_DOUBLE_EQ(s.p50_ns, 350.0);
  EXPECT_NEAR(s.p99_ns, 1938.0, 1e-9);
  // Longest: rank 1 in calls 0-3, rank 0 in call 4.
  EXPECT_EQ(s.longest, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(s.longest_rank, 1);
  // Arrivals (each rank's time since the barrier): call 0 both 0 (nobody last), then rank 1 at
  // 150 vs 100, 400 vs 300, 750 vs 600, 1200 vs 1000: last in 4 times.
  EXPECT_EQ(s.last_in, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(s.last_in_rank, 1);
  // Spikes above 3 x 350 = 1050: rank 0's call 4 (2000) alone.
  EXPECT_EQ(s.spikes, 1);
  EXPECT_EQ(s.spikes_by_rank, (std::vector<int64_t>{1, 0}));
  EXPECT_DOUBLE_EQ(s.worst_ratio, 2000.0 / 350.0);
  EXPECT_EQ(s.worst_rank, 0);
  EXPECT_EQ(s.worst_call, 4);

  // A lower factor, 1.25 x 350 = 437.5: rank 1's 450 and 500 too, nothing of rank 0's below 2000.
  const BenchSpread low = bench_spread(kTwoRanks, 1.25);
  EXPECT_EQ(low.spikes, 3);
  EXPECT_EQ(low.spikes_by_rank, (std::vector<int64_t>{1, 2}));
  EXPECT_THROW(bench_spread(kTwoRanks, 1.0), std::invalid_argument);
}

TEST(BenchSpread, TiesGoToTheLowestRankAndUnevenSeriesCountTheirCommonCalls) {
  // Three ranks, equal times in call 0; rank 2 has one call more than the others.
  const std::vector<CollectiveBenchSamplesRow> rows = {
      {"broadcast", 8, 0, {10, 10}}, {"broadcast", 8, 1, {10, 30}}, {"broadcast", 8, 2, {10, 20, 70}}};
  const BenchSpread s = bench_spread(rows);
  EXPECT_EQ(s.samples, 7);
  EXPECT_EQ(s.calls, 2);
  EXPECT_EQ(s.longest, (std::vector<int64_t>{1, 1, 0}));  // call 0: a tie, rank 0; call 1: rank 1 (30)
  EXPECT_EQ(s.longest_rank, 0);
  EXPECT_EQ(s.last_in, (std::vector<int64_t>{0, 0, 0}));  // every rank at 0, then every rank at 10
  EXPECT_EQ(s.last_in_rank, -1);
  // The two calls every rank made took 10 and 30: p50 = 20, p99 = 10 + 0.99 x 20. Above 3 x 20:
  // rank 2's third call (70), counted though the others made no third call.
  EXPECT_DOUBLE_EQ(s.p50_ns, 20.0);
  EXPECT_NEAR(s.p99_ns, 29.8, 1e-9);
  EXPECT_EQ(s.spikes, 1);
  EXPECT_EQ(s.spikes_by_rank, (std::vector<int64_t>{0, 0, 1}));
  EXPECT_DOUBLE_EQ(s.worst_ratio, 3.5);
  EXPECT_EQ(s.worst_rank, 2);
  EXPECT_EQ(s.worst_call, 2);

  // A rank without calls: no call every rank made, so no percentiles, though calls were kept.
  const std::vector<CollectiveBenchSamplesRow> gap = {{"broadcast", 8, 0, {10}}, {"broadcast", 8, 2, {10}}};
  const BenchSpread g = bench_spread(gap);
  EXPECT_EQ(g.samples, 2);
  EXPECT_EQ(g.ranks, 3);
  EXPECT_EQ(g.calls, 0);
  EXPECT_EQ(g.p50_ns, -1);
}

TEST(BenchSpread, NoCallsNoFiguresAndRowsGroupedBySize) {
  const BenchSpread none = bench_spread(std::vector<CollectiveBenchSamplesRow>{});
  EXPECT_EQ(none.samples, 0);
  EXPECT_EQ(none.p50_ns, -1);
  EXPECT_EQ(none.p99_ns, -1);
  EXPECT_EQ(none.longest_rank, -1);
  EXPECT_EQ(none.worst_rank, -1);

  std::vector<CollectiveBenchSamplesRow> rows = kTwoRanks;
  rows.insert(rows.begin() + 1, {"all_reduce", 8, 0, {7}});
  const auto spreads = bench_spreads(rows);
  ASSERT_EQ(spreads.size(), 2u);
  EXPECT_DOUBLE_EQ(spreads.at({"all_reduce", 1024}).p50_ns, 350.0);
  EXPECT_EQ(spreads.at({"all_reduce", 8}).samples, 1);
  EXPECT_DOUBLE_EQ(spreads.at({"all_reduce", 8}).p99_ns, 7.0);
}

}  // namespace
}  // namespace ts::reports
