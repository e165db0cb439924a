// Collective calls split into waiting for the last rank and moving data (reports/
// collective_split.h), on rank 0's clock: rank 1's clock runs 5 s ahead of rank 0's.
#include "reports/collective_split.h"

#include <gtest/gtest.h>

#include <vector>

namespace ts::reports {
namespace {

constexpr int64_t kSkew = 5'000'000'000;

// Rank 1 measured 5 s ahead, within 100 ns.
RankClocks skewed() {
  const std::vector<store::RankClockRow> rows = {{1, "start", kSkew, 100, 0, 200, 32}};
  return RankClocks(rows);
}

store::CollectiveRow call(int64_t rank, int64_t iteration, const std::string& label, int64_t start, int64_t end) {
  const int64_t shift = rank == 1 ? kSkew : 0;
  return {rank, iteration, 5, "all_reduce", label, 4096, start + shift, end + shift};
}

TEST(CollectiveSplit, TheEarlyRankWaitsForTheLastAndBothMoveAfterIt) {
  // Iteration 3: rank 0 arrives at 1000, rank 1 at 3000 (its clock: 5 s later); both end at 5000.
  const std::vector<store::CollectiveRow> rows = {call(0, 3, "bucket 0", 1000, 5000),
                                                  call(1, 3, "bucket 0", 3000, 5000)};
  const auto calls = split_collectives(rows, skewed(), 2);
  ASSERT_EQ(calls.calls.size(), 1u);
  const auto& c = calls.calls[0];
  EXPECT_EQ(c.last_rank, 1);
  EXPECT_EQ(c.last_arrival_ns, 3000);
  EXPECT_EQ(c.waiting_ns, (std::vector<int64_t>{2000, 0}));
  EXPECT_EQ(c.moving_ns, (std::vector<int64_t>{2000, 2000}));
  EXPECT_EQ(calls.uncertainty_ns, 200);  // two ranks' times meet: twice the bound
  EXPECT_EQ(calls.incomplete, 0);
}

TEST(CollectiveSplit, CallsOfOneLabelPairUpInTheOrderTheyBegan) {
  // Two negotiations in one iteration, written out of order; rank 1 is last in the first only.
  const std::vector<store::CollectiveRow> rows = {
      call(1, 0, "priority negotiation", 600, 700), call(0, 0, "priority negotiation", 100, 300),
      call(1, 0, "priority negotiation", 200, 300), call(0, 0, "priority negotiation", 500, 700)};
  const auto calls = split_collectives(rows, skewed(), 2);
  ASSERT_EQ(calls.calls.size(), 2u);
  EXPECT_EQ(calls.calls[0].last_rank, 1);
  EXPECT_EQ(calls.calls[0].waiting_ns, (std::vector<int64_t>{100, 0}));
  EXPECT_EQ(calls.calls[1].last_rank, 1);
  EXPECT_EQ(calls.calls[1].waiting_ns, (std::vector<int64_t>{100, 0}));
}

TEST(CollectiveSplit, AMissingCallIsCountedAndAnUnmeasuredClockSplitsNothing) {
  const std::vector<store::CollectiveRow> rows = {call(0, 1, "bucket 0", 0, 10), call(0, 1, "bucket 0", 20, 30),
                                                  call(1, 1, "bucket 0", 0, 10), call(0, -1, "parameters", 0, 5)};
  const auto calls = split_collectives(rows, skewed(), 2);
  EXPECT_EQ(calls.calls.size(), 1u);
  EXPECT_EQ(calls.incomplete, 1);  // rank 1 has no second call; outside an iteration: not counted
  EXPECT_TRUE(split_collectives(rows, RankClocks(), 2).calls.empty()) << "rank 1's clock is unknown";
  EXPECT_TRUE(split_collectives(rows, skewed(), 1).calls.empty());
}

TEST(CollectiveSplit, PerRankTotalsAndTheStragglerOverTheTimedIterations) {
  std::vector<store::CollectiveRow> rows;
  for (int64_t it = 0; it < 4; ++it) {  // rank 1 arrives 1 us late in every iteration; iteration 0 is warm-up
    const int64_t t = it * 100'000;
    rows.push_back(call(0, it, "bucket 0", t, t + 3000));
    rows.push_back(call(1, it, "bucket 0", t + 1000, t + 3000));
  }
  const auto calls = split_collectives(rows, skewed(), 2);
  const std::vector<int64_t> timed = {1, 2, 3};
  const auto per_rank = wait_move_by_rank(calls, timed, 2);
  ASSERT_EQ(per_rank.size(), 2u);
  EXPECT_DOUBLE_EQ(per_rank[0].waiting_ms, 0.001);
  EXPECT_DOUBLE_EQ(per_rank[0].moving_ms, 0.002);
  EXPECT_EQ(per_rank[0].last_arrivals, 0);
  EXPECT_DOUBLE_EQ(per_rank[1].waiting_ms, 0.0);
  EXPECT_DOUBLE_EQ(per_rank[1].moving_ms, 0.002);
  EXPECT_EQ(per_rank[1].last_arrivals, 3);
  EXPECT_DOUBLE_EQ(per_rank[1].others_waited_ms, 0.001);
  // 3 timed calls of 4096 bytes (bus factor 1 on 2 ranks), each moved in 2000 ns: 2.048 GB/s.
  EXPECT_DOUBLE_EQ(per_rank[0].moving_busbw_gbps, 3 * 4096.0 / (3 * 2000.0));
  EXPECT_DOUBLE_EQ(per_rank[1].moving_busbw_gbps, 3 * 4096.0 / (3 * 2000.0));
}

TEST(CollectiveSplit, StoredRowsGiveBackTheSameSplit) {
  // Two labels, two calls of one label, over two iterations; rank 1 is 5 s ahead.
  const std::vector<store::CollectiveRow> rows = {
      call(0, 1, "bucket 0", 1000, 5000),         call(1, 1, "bucket 0", 3000, 5000),
      call(0, 1, "priority negotiation", 0, 50),  call(1, 1, "priority negotiation", 20, 60),
      call(0, 1, "priority negotiation", 70, 90), call(1, 1, "priority negotiation", 65, 90),
      call(0, 2, "bucket 0", 9000, 9500),         call(1, 2, "bucket 0", 8000, 9500)};
  const auto split = split_collectives(rows, skewed(), 2);
  ASSERT_EQ(split.calls.size(), 4u);
  const auto stored = to_rows(split);
  ASSERT_EQ(stored.size(), 8u);  // a row per call and rank
  for (const auto& w : stored) {
    EXPECT_EQ(w.uncertainty_ns, 200);
    EXPECT_EQ(w.waiting_ns, std::max<int64_t>(w.last_arrival_ns - w.arrival_ns, 0)) << w.label << " " << w.rank;
  }
  const auto back = from_rows(stored, 2);
  EXPECT_EQ(back.uncertainty_ns, split.uncertainty_ns);
  EXPECT_EQ(back.incomplete, 0);
  ASSERT_EQ(back.calls.size(), split.calls.size());
  for (size_t i = 0; i < split.calls.size(); ++i) {
    SCOPED_TRACE(i);
    const auto &a = split.calls[i], &b = back.calls[i];
    EXPECT_EQ(b.iteration, a.iteration);
    EXPECT_EQ(b.label, a.label);
    EXPECT_EQ(b.call, a.call);
    EXPECT_EQ(b.bytes, a.bytes);
    EXPECT_EQ(b.last_rank, a.last_rank);
    EXPECT_EQ(b.last_arrival_ns, a.last_arrival_ns);
    EXPECT_EQ(b.arrival_ns, a.arrival_ns);
    EXPECT_EQ(b.waiting_ns, a.waiting_ns);
    EXPECT_EQ(b.moving_ns, a.moving_ns);
  }
  // The second negotiation's calls are told apart by `call`; a rank's row missing: left out, counted.
  auto partial = stored;
  partial.pop_back();
  const auto without = from_rows(partial, 2);
  EXPECT_EQ(without.calls.size(), 3u);
  EXPECT_EQ(without.incomplete, 1);
}

}  // namespace
}  // namespace ts::reports
