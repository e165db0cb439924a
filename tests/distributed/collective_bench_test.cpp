// The collectives benchmark on real ranks: every size checked right, sizes rounded to whole
// blocks per rank, the ranks' figures combined the same on every rank, every rank's calls kept
// and agreeing with the figures, a communicator that returns wrong results caught by the check,
// and a deadline passed on one rank stopping every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>
#include <vector>

#include "distributed/collective_bench.h"
#include "distributed/comm_figures.h"
#include "distributed/mpi_communicator.h"
#include "tests/distributed/forwarding_communicator.h"

namespace ts::distributed {
namespace {

CollectiveBenchOptions tiny() {
  CollectiveBenchOptions o;
  o.min_bytes = 4;
  o.max_bytes = 4096;
  o.factor = 4;
  o.iterations = 3;
  o.warmup = 1;
  return o;
}

TEST(CollectiveBench, EveryCollectiveAndSizeIsRightAndCombinedOnEveryRank) {
  MpiCommunicator comm;
  const int n = comm.size();
  auto memory = host_memory();
  std::vector<CollectiveBenchResult> results;
  ASSERT_EQ(run_collective_bench(comm, comm, *memory, tiny(), nullptr,
                                 [&](const CollectiveBenchResult& r) { results.push_back(r); }),
            BenchEnd::finished);
  int barriers = 0;
  for (const auto& r : results) {
    SCOPED_TRACE(std::string(to_string(r.collective)) + " " + std::to_string(r.bytes));
    EXPECT_EQ(r.wrong, 0);
    EXPECT_EQ(r.ranks, n);
    EXPECT_EQ(r.iterations, 3);
    EXPECT_GT(r.time_ns, 0);
    EXPECT_LE(r.min_time_ns, r.time_ns);
    EXPECT_GE(r.max_time_ns, r.time_ns);
    // Every rank's calls, the same on every rank: their mean is the time, their extremes min and max.
    ASSERT_EQ(r.samples_ns.size(), static_cast<size_t>(3 * n));
    double sum = 0;
    for (const int64_t t : r.samples_ns) {
      EXPECT_GT(t, 0);
      sum += static_cast<double>(t);
    }
    EXPECT_NEAR(sum / static_cast<double>(r.samples_ns.size()), r.time_ns, 1e-6 * r.time_ns);
    EXPECT_EQ(*std::min_element(r.samples_ns.begin(), r.samples_ns.end()), r.min_time_ns);
    EXPECT_EQ(*std::max_element(r.samples_ns.begin(), r.samples_ns.end()), r.max_time_ns);
    int64_t first = r.samples_ns.front();
    comm.all_reduce(&first, 1, DataType::i64, ReduceOp::max, "first sample");
    EXPECT_EQ(first, r.samples_ns.front()) << "rank 0's first call, as every rank holds it";
    if (r.collective == Collective::barrier) {
      ++barriers;
      continue;
    }
    // Gather and scatter buffers are whole blocks of float32 per rank.
    const int64_t block =
        (r.collective == Collective::all_gather || r.collective == Collective::reduce_scatter) ? 4 * n : 4;
    EXPECT_EQ(r.bytes % block, 0);
    EXPECT_NEAR(r.busbw_gbps, r.algbw_gbps * bus_factor(r.collective, n), 1e-9);
    // Every rank holds the same combined figures (they are what rank 0 stores).
    double t = r.time_ns;
    comm.all_reduce(&t, 1, DataType::f64, ReduceOp::max, "t");
    EXPECT_EQ(t, r.time_ns);
  }
  EXPECT_EQ(barriers, 1);
  // 4, 16, 64, 256, 1024, 4096 bytes for all-reduce and broadcast.
  int all_reduce = 0;
  for (const auto& r : results) all_reduce += r.collective == Collective::all_reduce;
  EXPECT_EQ(all_reduce, 6);
}

// All-reduce with max instead of sum: wrong on every rank but one per element.
class MaxingCommunicator final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;

 protected:
  void do_all_reduce(void* data, size_t count, DataType type, ReduceOp) override {
    inner_.all_reduce(data, count, type, ReduceOp::max, "faulty");
  }
};

TEST(CollectiveBench, WrongResultsAreCounted) {
  MpiCommunicator host;
  MpiCommunicator inner;
  MaxingCommunicator faulty(inner);
  auto memory = host_memory();
  CollectiveBenchOptions o = tiny();
  o.collectives = {Collective::all_reduce, Collective::broadcast};
  o.max_bytes = 64;
  int64_t all_reduce_wrong = 0, broadcast_wrong = 0;
  ASSERT_EQ(run_collective_bench(faulty, host, *memory, o, nullptr,
                                 [&](const CollectiveBenchResult& r) {
                                   (r.collective == Collective::all_reduce ? all_reduce_wrong : broadcast_wrong) +=
                                       r.wrong;
                                 }),
            BenchEnd::finished);
  EXPECT_GT(all_reduce_wrong, 0);
  EXPECT_EQ(broadcast_wrong, 0);
}

TEST(CollectiveBench, OneRanksStopStopsEveryRank) {
  MpiCommunicator comm;
  auto memory = host_memory();
  std::atomic<bool> stop{comm.rank() == comm.size() - 1};
  int results = 0;
  EXPECT_EQ(run_collective_bench(comm, comm, *memory, tiny(), &stop, [&](const CollectiveBenchResult&) { ++results; }),
            BenchEnd::stopped);
  EXPECT_EQ(results, 0);
}

// --timeout between sizes: a deadline passed on the last rank alone stops every rank, timed out
// (over a stop at the same time); one far off changes nothing.
TEST(CollectiveBench, ADeadlinePassedOnOneRankStopsEveryRankTimedOut) {
  MpiCommunicator comm;
  auto memory = host_memory();
  CollectiveBenchOptions o = tiny();
  const auto now = std::chrono::steady_clock::now();
  o.deadline = comm.rank() == comm.size() - 1 ? now - std::chrono::seconds(1) : now + std::chrono::hours(1);
  std::atomic<bool> stop{comm.rank() == 0};
  int results = 0;
  EXPECT_EQ(run_collective_bench(comm, comm, *memory, o, &stop, [&](const CollectiveBenchResult&) { ++results; }),
            BenchEnd::timed_out);
  EXPECT_EQ(results, 0);
  o.deadline = now + std::chrono::hours(1);
  o.collectives = {Collective::barrier};
  EXPECT_EQ(run_collective_bench(comm, comm, *memory, o, nullptr, [&](const CollectiveBenchResult&) { ++results; }),
            BenchEnd::finished);
  EXPECT_EQ(results, 1);
}

// The hook before each timed call sees every timed call of every size, in order.
TEST(CollectiveBench, TheHookSeesEveryTimedCall) {
  MpiCommunicator comm;
  auto memory = host_memory();
  CollectiveBenchOptions o = tiny();
  o.collectives = {Collective::all_reduce};
  o.max_bytes = 64;  // 4, 16, 64
  std::vector<std::pair<int64_t, int>> seen;
  o.before_timed_call = [&](Collective c, int64_t bytes, int call) {
    EXPECT_EQ(c, Collective::all_reduce);
    seen.emplace_back(bytes, call);
  };
  ASSERT_EQ(run_collective_bench(comm, comm, *memory, o, nullptr, [](const CollectiveBenchResult&) {}),
            BenchEnd::finished);
  const std::vector<std::pair<int64_t, int>> want = {{4, 0},  {4, 1},  {4, 2},  {16, 0}, {16, 1},
                                                     {16, 2}, {64, 0}, {64, 1}, {64, 2}};
  EXPECT_EQ(seen, want);
}

}  // namespace
}  // namespace ts::distributed
