// The MPI communicator on real ranks: each collective's result, and what it records.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/mpi_communicator.h"
#include "distributed/ring_all_reduce.h"

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

// The ring (ring_all_reduce.h) gives what MPI_Allreduce gives, on every rank, for each type and
// op, buffers smaller than the ring, not divisible by it, and pieces far smaller than a segment
// (many receives reduced as they arrive). Values are small integers: every order of summing them
// is exact, so the results are compared for equality.
template <typename T>
void expect_ring_matches_mpi(MPI_Datatype mpi_type, DataType type, ReduceOp op, MPI_Op mpi_op) {
  int n = 1, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  for (size_t count :
       {size_t{1}, static_cast<size_t>(n) - 1, static_cast<size_t>(n) + 1, size_t{1000}, size_t{100'003}}) {
    for (size_t chunk_bytes : {size_t{24}, size_t{1} << 20}) {
      SCOPED_TRACE(testing::Message() << "count " << count << ", pieces of " << chunk_bytes << " bytes");
      std::vector<T> ring(count);
      for (size_t i = 0; i < count; ++i) ring[i] = static_cast<T>((i * 7 + static_cast<size_t>(r) * 13) % 101);
      std::vector<T> mpi = ring;
      MPI_Allreduce(MPI_IN_PLACE, mpi.data(), static_cast<int>(count), mpi_type, mpi_op, MPI_COMM_WORLD);
      RingOptions o;
      o.chunk_bytes = chunk_bytes;
      ring_all_reduce(MPI_COMM_WORLD, ring.data(), count, type, op, o);
      EXPECT_EQ(ring, mpi);
    }
  }
}

TEST(RingAllReduce, GivesWhatMpiAllreduceGivesForEachTypeOpAndSize) {
  expect_ring_matches_mpi<float>(MPI_FLOAT, DataType::f32, ReduceOp::sum, MPI_SUM);
  expect_ring_matches_mpi<float>(MPI_FLOAT, DataType::f32, ReduceOp::max, MPI_MAX);
  expect_ring_matches_mpi<double>(MPI_DOUBLE, DataType::f64, ReduceOp::min, MPI_MIN);
  expect_ring_matches_mpi<int64_t>(MPI_INT64_T, DataType::i64, ReduceOp::sum, MPI_SUM);
  expect_ring_matches_mpi<int32_t>(MPI_INT32_T, DataType::i32, ReduceOp::max, MPI_MAX);
  expect_ring_matches_mpi<uint8_t>(MPI_UINT8_T, DataType::u8, ReduceOp::min, MPI_MIN);
}

// A large all-reduce through the communicator, the ring asked for, is recorded as one call.
TEST(RingAllReduce, TheCommunicatorsLargeAllReduceIsOneRecordedCall) {
  ::setenv("TS_ALLREDUCE", "ring", 1);
  MpiCommunicator comm;
  ::unsetenv("TS_ALLREDUCE");
  std::vector<float> big(kRingMinBytes / sizeof(float) * 3 + 5, 1.0f);
  comm.take_records();
  comm.all_reduce(big.data(), big.size(), DataType::f32, ReduceOp::sum, "big");
  for (float v : big) ASSERT_EQ(v, static_cast<float>(comm.size()));
  const auto records = comm.take_records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].bytes, static_cast<int64_t>(big.size() * sizeof(float)));
}

TEST(RingAllReduce, TheAlgorithmIsReadFromTheEnvironmentAndABadOneIsRefused) {
  const char* before = std::getenv("TS_ALLREDUCE");
  const std::string saved = before ? before : "";
  ::setenv("TS_ALLREDUCE", "mpi", 1);
  EXPECT_EQ(all_reduce_algorithm(), AllReduceAlgorithm::mpi);
  ::setenv("TS_ALLREDUCE", "ring", 1);
  EXPECT_EQ(all_reduce_algorithm(), AllReduceAlgorithm::ring);
  ::setenv("TS_ALLREDUCE", "tree", 1);
  EXPECT_THROW(all_reduce_algorithm(), std::invalid_argument);
  if (before) {
    ::setenv("TS_ALLREDUCE", saved.c_str(), 1);
  } else {
    ::unsetenv("TS_ALLREDUCE");
  }
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
