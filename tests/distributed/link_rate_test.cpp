// The TCP rate between two ranks (distributed/link_rate.h), here over this host's own addresses:
// measured, the same result on every rank, bounded in time; a rank with itself refused.
#include "distributed/link_rate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

#include "distributed/mpi_communicator.h"

namespace ts::distributed {
namespace {

TEST(LinkRate, TwoRanksMeasureOneStreamAndEveryRankGetsTheResult) {
  MpiCommunicator comm;
  if (comm.size() < 2) GTEST_SKIP() << "needs two ranks";
  const int to = comm.size() - 1;
  const auto started = std::chrono::steady_clock::now();
  const LinkRate r = measure_tcp_rate(comm, 0, to, std::chrono::milliseconds(300));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(r.measured) << r.why_not;
  EXPECT_EQ(r.from, 0);
  EXPECT_EQ(r.to, to);
  EXPECT_GT(r.bytes, 0);
  EXPECT_GT(r.ns, 0);
  EXPECT_DOUBLE_EQ(r.gbps, static_cast<double>(r.bytes) / static_cast<double>(r.ns));
  EXPECT_FALSE(r.address.empty());
  EXPECT_LT(seconds, 10.0);
  // Every rank holds the receiver's figures.
  int64_t bytes = r.bytes;
  comm.all_reduce(&bytes, 1, DataType::i64, ReduceOp::max, "bytes");
  EXPECT_EQ(bytes, r.bytes);
  EXPECT_NE(r.describe().find(" GB/s"), std::string::npos) << r.describe();
  EXPECT_THROW(measure_tcp_rate(comm, 1, 1, std::chrono::milliseconds(10)), std::invalid_argument);
}

}  // namespace
}  // namespace ts::distributed
