// The collectives benchmark on real ranks: every size checked right, sizes rounded to whole
// blocks per rank, the ranks' figures combined the same on every rank, and a communicator that
// returns wrong results caught by the check.
#include <gtest/gtest.h>

#include <atomic>

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
  ASSERT_TRUE(run_collective_bench(comm, comm, *memory, tiny(), nullptr,
                                   [&](const CollectiveBenchResult& r) { results.push_back(r); }));
  int barriers = 0;
  for (const auto& r : results) {
    SCOPED_TRACE(std::string(to_string(r.collective)) + " " + std::to_string(r.bytes));
    EXPECT_EQ(r.wrong, 0);
    EXPECT_EQ(r.ranks, n);
    EXPECT_EQ(r.iterations, 3);
    EXPECT_GT(r.time_ns, 0);
    EXPECT_LE(r.min_time_ns, r.time_ns);
    EXPECT_GE(r.max_time_ns, r.time_ns);
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
  ASSERT_TRUE(run_collective_bench(faulty, host, *memory, o, nullptr, [&](const CollectiveBenchResult& r) {
    (r.collective == Collective::all_reduce ? all_reduce_wrong : broadcast_wrong) += r.wrong;
  }));
  EXPECT_GT(all_reduce_wrong, 0);
  EXPECT_EQ(broadcast_wrong, 0);
}

TEST(CollectiveBench, OneRanksStopStopsEveryRank) {
  MpiCommunicator comm;
  auto memory = host_memory();
  std::atomic<bool> stop{comm.rank() == comm.size() - 1};
  int results = 0;
  EXPECT_FALSE(
      run_collective_bench(comm, comm, *memory, tiny(), &stop, [&](const CollectiveBenchResult&) { ++results; }));
  EXPECT_EQ(results, 0);
}

}  // namespace
}  // namespace ts::distributed
