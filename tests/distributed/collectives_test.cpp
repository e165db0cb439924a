// The MPI communicator on real ranks: each collective's result, and what it records.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "distributed/mpi_communicator.h"

namespace ts::distributed {
namespace {

TEST(MpiCommunicator, AllReduceSumsMaxesAndMinsAcrossRanks) {
  MpiCommunicator comm;
  const int n = comm.size(), r = comm.rank();
  std::vector<float> f = {1.0f + r, -2.0f * r, 0.5f};
  comm.all_reduce(f.data(), f.size(), DataType::f32, ReduceOp::sum, "t");
  EXPECT_FLOAT_EQ(f[0], n + n * (n - 1) / 2.0f);
  EXPECT_FLOAT_EQ(f[1], -2.0f * n * (n - 1) / 2.0f);
  EXPECT_FLOAT_EQ(f[2], 0.5f * n);
  int64_t mx = r * 10, mn = r * 10;
  comm.all_reduce(&mx, 1, DataType::i64, ReduceOp::max, "t");
  comm.all_reduce(&mn, 1, DataType::i64, ReduceOp::min, "t");
  EXPECT_EQ(mx, (n - 1) * 10);
  EXPECT_EQ(mn, 0);
}

TEST(MpiCommunicator, BroadcastGatherScatter) {
  MpiCommunicator comm;
  const int n = comm.size(), r = comm.rank();
  std::vector<double> b = {r == 1 ? 42.0 : -1.0, r == 1 ? 7.0 : -1.0};
  comm.broadcast(b.data(), b.size(), DataType::f64, 1, "t");
  EXPECT_EQ(b, (std::vector<double>{42.0, 7.0}));

  const std::vector<int32_t> mine = {r, 100 + r};
  std::vector<int32_t> all(2 * static_cast<size_t>(n), -1);
  comm.all_gather(mine.data(), all.data(), 2, DataType::i32, "t");
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(all[2 * k], k);
    EXPECT_EQ(all[2 * k + 1], 100 + k);
  }

  // Block k of every rank's input is k + rank: block r of the sum is n*r + n(n-1)/2.
  std::vector<float> send(3 * static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) std::fill_n(send.begin() + 3 * k, 3, static_cast<float>(k + r));
  std::vector<float> recv(3, -1);
  comm.reduce_scatter(send.data(), recv.data(), 3, DataType::f32, ReduceOp::sum, "t");
  for (float v : recv) EXPECT_FLOAT_EQ(v, n * r + n * (n - 1) / 2.0f);
  comm.barrier("t");
}

TEST(MpiCommunicator, RecordsEveryCallWithNcclTestsSizes) {
  MpiCommunicator comm;
  const int n = comm.size();
  std::vector<float> x(1000, 1.0f), gathered(1000 * static_cast<size_t>(n));
  comm.all_reduce(x.data(), x.size(), DataType::f32, ReduceOp::sum, "bucket 0.0");
  comm.all_gather(x.data(), gathered.data(), x.size(), DataType::f32, "g");
  comm.barrier("b");
  const auto records = comm.take_records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].collective, Collective::all_reduce);
  EXPECT_EQ(records[0].label, "bucket 0.0");
  EXPECT_EQ(records[0].bytes, 4000);
  EXPECT_EQ(records[1].bytes, 4000 * n);  // the whole gathered buffer, as nccl-tests counts it
  EXPECT_EQ(records[2].bytes, 0);
  for (const auto& rec : records) EXPECT_LE(rec.start_ns, rec.end_ns);
  EXPECT_TRUE(comm.take_records().empty());  // taken once
}

TEST(MpiCommunicator, LargeBuffersAreReducedWhole) {
  MpiCommunicator comm;
  std::vector<float> x(3'000'001);
  std::iota(x.begin(), x.end(), 0.0f);
  comm.all_reduce(x.data(), x.size(), DataType::f32, ReduceOp::max, "big");
  EXPECT_FLOAT_EQ(x.front(), 0.0f);
  EXPECT_FLOAT_EQ(x.back(), 3'000'000.0f);
}

}  // namespace
}  // namespace ts::distributed
