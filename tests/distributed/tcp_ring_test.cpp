// The all-reduce over TCP sockets (distributed/tcp_ring.h) on real ranks: the same results as
// MPI_Allreduce, through the communicator when TS_ALLREDUCE=tcp asks for it, interfaces chosen by
// TS_TCP_IF, and a peer that closes or falls silent mid-call failing its neighbours in bounded
// time with an error that names it.
#include "distributed/tcp_ring.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "distributed/error.h"
#include "distributed/mpi_communicator.h"
#include "distributed/ring_all_reduce.h"

namespace ts::distributed {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Sets an environment variable for a scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) saved_ = v;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (saved_) {
      ::setenv(name_, saved_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

// Small integers: every order of summing them is exact, so results compare for equality.
template <typename T>
std::vector<T> rank_values(size_t count, int rank) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>((i * 7 + static_cast<size_t>(rank) * 13) % 101);
  return v;
}

template <typename T>
void expect_tcp_matches_mpi(TcpRing& ring, MPI_Datatype mpi_type, DataType type, ReduceOp op, MPI_Op mpi_op) {
  const int n = world_size(), r = world_rank();
  // Fewer elements than ranks (empty segments), one more, not divisible by the ranks or the
  // pieces, several pieces per segment.
  for (size_t count : {size_t{1}, static_cast<size_t>(n) - 1, static_cast<size_t>(n) + 1, size_t{1000}, size_t{100'003},
                       size_t{262'147}}) {
    SCOPED_TRACE(testing::Message() << "count " << count);
    std::vector<T> tcp = rank_values<T>(count, r);
    std::vector<T> mpi = tcp;
    MPI_Allreduce(MPI_IN_PLACE, mpi.data(), static_cast<int>(count), mpi_type, mpi_op, MPI_COMM_WORLD);
    ring.all_reduce(tcp.data(), count, type, op);
    EXPECT_EQ(tcp, mpi);
  }
}

void expect_every_type_and_op(TcpRing& ring) {
  expect_tcp_matches_mpi<float>(ring, MPI_FLOAT, DataType::f32, ReduceOp::sum, MPI_SUM);
  expect_tcp_matches_mpi<float>(ring, MPI_FLOAT, DataType::f32, ReduceOp::max, MPI_MAX);
  expect_tcp_matches_mpi<float>(ring, MPI_FLOAT, DataType::f32, ReduceOp::min, MPI_MIN);
  expect_tcp_matches_mpi<double>(ring, MPI_DOUBLE, DataType::f64, ReduceOp::sum, MPI_SUM);
  expect_tcp_matches_mpi<double>(ring, MPI_DOUBLE, DataType::f64, ReduceOp::min, MPI_MIN);
  expect_tcp_matches_mpi<int64_t>(ring, MPI_INT64_T, DataType::i64, ReduceOp::sum, MPI_SUM);
  expect_tcp_matches_mpi<int64_t>(ring, MPI_INT64_T, DataType::i64, ReduceOp::max, MPI_MAX);
  expect_tcp_matches_mpi<int32_t>(ring, MPI_INT32_T, DataType::i32, ReduceOp::max, MPI_MAX);
  expect_tcp_matches_mpi<int32_t>(ring, MPI_INT32_T, DataType::i32, ReduceOp::sum, MPI_SUM);
  expect_tcp_matches_mpi<uint8_t>(ring, MPI_UINT8_T, DataType::u8, ReduceOp::min, MPI_MIN);
  expect_tcp_matches_mpi<uint8_t>(ring, MPI_UINT8_T, DataType::u8, ReduceOp::max, MPI_MAX);
}

TEST(TcpRing, GivesWhatMpiAllreduceGivesForEachTypeOpAndSize) {
  TcpRing ring(MPI_COMM_WORLD, {});
  if (world_size() > 1) {
    EXPECT_FALSE(ring.successor_address().empty());
    EXPECT_FALSE(ring.predecessor_address().empty());
  }
  expect_every_type_and_op(ring);
}

// Pieces far smaller than a segment and of a size no element count divides evenly: many
// receives reduced as they arrive, each sent on before the segment is whole.
TEST(TcpRing, GivesWhatMpiAllreduceGivesWithSmallOddPieces) {
  TcpRingOptions o;
  o.piece_bytes = 1000;
  TcpRing ring(MPI_COMM_WORLD, o);
  expect_every_type_and_op(ring);
  o.piece_bytes = 24;
  o.socket_buffer_bytes = 0;  // the kernel's own buffers
  TcpRing tiny(MPI_COMM_WORLD, o);
  expect_tcp_matches_mpi<double>(tiny, MPI_DOUBLE, DataType::f64, ReduceOp::sum, MPI_SUM);
}

// Through the communicator, TS_ALLREDUCE=tcp: buffers below the threshold (MPI_Allreduce), at it
// and above it (the ring, set up once and kept), each one recorded call with the right result.
TEST(TcpRing, TheCommunicatorTakesItForLargeBuffersWhenAskedFor) {
  std::optional<MpiCommunicator> made;
  {
    ScopedEnv env("TS_ALLREDUCE", "tcp");
    made.emplace();
  }
  MpiCommunicator& comm = *made;
  const int n = comm.size(), r = comm.rank();
  comm.take_records();
  const size_t at = kRingMinBytes / sizeof(int32_t);
  const TcpRing* first = nullptr;
  for (size_t count : {at - 1, at, at + 1, 3 * at + 5, size_t{4} << 20}) {
    SCOPED_TRACE(testing::Message() << "count " << count);
    if (count < at) {
      EXPECT_EQ(comm.tcp_ring(), nullptr);
    }
    std::vector<int32_t> v = rank_values<int32_t>(count, r);
    std::vector<int32_t> expected = v;
    MPI_Allreduce(MPI_IN_PLACE, expected.data(), static_cast<int>(count), MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    comm.all_reduce(v.data(), count, DataType::i32, ReduceOp::sum, "big");
    EXPECT_EQ(v, expected);
    const auto records = comm.take_records();
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].bytes, static_cast<int64_t>(count * sizeof(int32_t)));
    if (count >= at && n > 1) {
      ASSERT_NE(comm.tcp_ring(), nullptr);
      if (first == nullptr) first = comm.tcp_ring();
      EXPECT_EQ(comm.tcp_ring(), first);  // connected once, kept
    }
  }
  // Every rank's own: max of the ranks.
  std::vector<double> m(at, static_cast<double>(r));
  comm.all_reduce(m.data(), m.size(), DataType::f64, ReduceOp::max, "max");
  for (double x : m) ASSERT_EQ(x, static_cast<double>(n - 1));
}

TEST(TcpRing, TheAlgorithmAndTheInterfacesAreReadFromTheEnvironment) {
  {
    ScopedEnv env("TS_ALLREDUCE", "tcp");
    EXPECT_EQ(all_reduce_algorithm(), AllReduceAlgorithm::tcp);
    EXPECT_EQ(to_string(all_reduce_algorithm()), "tcp");
  }
  {
    ScopedEnv env("TS_ALLREDUCE", "TCP");
    EXPECT_THROW(all_reduce_algorithm(), std::invalid_argument);
    EXPECT_THROW(MpiCommunicator{}, std::invalid_argument);
  }
  {
    ScopedEnv env("TS_TCP_IF", "lo, 10.99.0.0/24");
    EXPECT_EQ(TcpRingOptions::from_environment().interfaces, "lo, 10.99.0.0/24");
  }
  {
    ScopedEnv env("TS_TCP_IF", "10.99.0.0/40");
    EXPECT_THROW(TcpRingOptions::from_environment(), std::invalid_argument);
  }
}

// The ring over the interface asked for (loopback: every rank here is on this host); one that
// no rank has fails on every rank, saying so.
TEST(TcpRing, TakesTheInterfacesAskedForAndRefusesOnesNoRankHas) {
  TcpRingOptions o;
  o.interfaces = "127.0.0.0/8";
  TcpRing ring(MPI_COMM_WORLD, o);
  if (world_size() > 1) {
    EXPECT_EQ(ring.successor_address().rfind("127.", 0), 0u) << ring.successor_address();
  }
  expect_tcp_matches_mpi<float>(ring, MPI_FLOAT, DataType::f32, ReduceOp::sum, MPI_SUM);
  if (world_size() == 1) return;
  o.interfaces = "ts-no-such-if";  // an interface no host has
  try {
    TcpRing none(MPI_COMM_WORLD, o);
    ADD_FAILURE() << "a ring over an address no rank has";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find("TS_TCP_IF=ts-no-such-if"), std::string::npos) << e.what();
  }
}

// Rank 1 leaves the call: closing its connections (`close`), or staying silent with them open.
// Its neighbours fail naming it, the others fail too, all in bounded time; the ring is broken
// for good after that.
void expect_a_lost_peer_fails_the_call(bool close) {
  const int n = world_size(), r = world_rank();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  TcpRingOptions o;
  o.idle_timeout = std::chrono::milliseconds(close ? 20'000 : 500);
  std::string error, again;
  double seconds = 0;
  {
    TcpRing ring(MPI_COMM_WORLD, o);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(close ? 300 : 4000));
    } else {
      std::vector<float> data(size_t{4} << 20, 1.0f);  // 16 MiB: more than the sockets' buffers hold
      const auto started = std::chrono::steady_clock::now();
      try {
        ring.all_reduce(data.data(), data.size(), DataType::f32, ReduceOp::sum);
      } catch (const DistError& e) {
        error = e.what();
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      try {
        ring.all_reduce(data.data(), data.size(), DataType::f32, ReduceOp::sum);
      } catch (const DistError& e) {
        again = e.what();
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 1) return;
  ASSERT_FALSE(error.empty()) << "rank " << r << ": the call did not fail";
  EXPECT_LT(seconds, 15.0) << error;
  // Its successor waits for its data; its predecessor, for room to send to it once it has
  // closed (when silent, its socket's buffers may hold all there is to send it).
  const int successor = 2 % n;
  if (r == successor || (close && r == 0)) {
    EXPECT_NE(error.find("rank 1 ("), std::string::npos) << error;
  }
  if (r == successor) {
    EXPECT_NE(error.find(close ? "closed" : "nothing moved"), std::string::npos) << error;
  }
  EXPECT_NE(again.find("broken by an earlier call"), std::string::npos) << again;
}

TEST(TcpRing, APeerThatClosesMidCallFailsItsNeighboursNamingIt) { expect_a_lost_peer_fails_the_call(true); }

TEST(TcpRing, APeerThatFallsSilentMidCallFailsWithinTheIdleLimit) { expect_a_lost_peer_fails_the_call(false); }

}  // namespace
}  // namespace ts::distributed
