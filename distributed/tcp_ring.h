#pragma once
// An all-reduce over plain TCP sockets (TS_ALLREDUCE=tcp; docs/distributed.md, "The TCP ring"):
// the ring schedule of ring_all_reduce.h (ring_schedule.h), but each rank holds one connection
// to its successor and one from its predecessor, and its waits sleep in the kernel (poll(2)) until
// data can move, as gloo's do. Open MPI's TCP transport moves data only while a waiting thread
// polls it: on a loaded machine a rank whose waiting thread has no core moves nothing (issue 41
// measured 40-91% of the TCP rate under load, gloo 91-99%); here the kernel moves the data
// whether this process runs or not, and a woken rank finds it waiting in the socket's buffer.
//
// Set up once (collectively) over an MPI communicator: each rank listens on an ephemeral port,
// shares its addresses (tcp_interfaces.h, TS_TCP_IF) and the port through an MPI_Allgather,
// connects to its successor (the addresses in order, each connect bounded, a hello and an
// answer that name both ranks and this ring, so a connection that reached a wrong process is
// dropped) and accepts its predecessor. The data path: both streams at once on non-blocking
// sockets, pieces reduced as they arrive, and a piece sent on as soon as it has been (the
// segment sent in step t + 1 is the one received in step t). Hosts share a byte order.
//
// Faults never hang: a peer that closes or resets its connection, or a call in which nothing
// moves for the idle limit, throws DistError naming the peer rank and its address; the ring is
// then broken and every later call throws at once.
#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace ts::distributed {

struct TcpRingOptions {
  size_t piece_bytes = size_t{1} << 20;  // what is reduced (and sent on) at a time
  std::string interfaces;                // TS_TCP_IF's form (tcp_interfaces.h); "": every address
  // SO_SNDBUF and SO_RCVBUF, set only where the kernel allows as much (net.core.wmem_max and
  // rmem_max); otherwise the kernel's own sizing stays.
  size_t socket_buffer_bytes = size_t{4} << 20;
  std::chrono::milliseconds connect_timeout{3000};  // per address, the hello's answer included
  // The longest a call may go without a byte moving either way before it fails; 0: twice the
  // stall watch's deadline for this rank's phase (stall_watch.h: the watch judges first), or
  // kDefaultIdleTimeout without a watch or deadline.
  std::chrono::milliseconds idle_timeout{0};
  static constexpr std::chrono::milliseconds kDefaultIdleTimeout{300'000};

  // The defaults, with TS_TCP_IF from the environment (checked: std::invalid_argument).
  static TcpRingOptions from_environment();
};

class TcpRing {
 public:
  // Collective over `comm` (only while it is made; it keeps no reference to it). Throws
  // DistError on every rank when any rank cannot listen, has no address TS_TCP_IF selects, or
  // cannot reach its successor; the message names the ranks and the addresses tried.
  explicit TcpRing(MPI_Comm comm, TcpRingOptions options = TcpRingOptions::from_environment());
  ~TcpRing();  // closes the connections
  TcpRing(const TcpRing&) = delete;
  TcpRing& operator=(const TcpRing&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The successor's address this rank connected to, the predecessor's it was accepted from
  // ("10.99.0.12:41234"); empty for a ring of one.
  const std::string& successor_address() const { return successor_address_; }
  const std::string& predecessor_address() const { return predecessor_address_; }

  // In place on `count` elements of `data`, every rank with the same arguments; every rank
  // ends with the same values. Throws DistError on a fault (see above).
  void all_reduce(void* data, size_t count, DataType type, ReduceOp op);

 private:
  void run(char* data, size_t count, DataType type, ReduceOp op);
  std::chrono::milliseconds idle_limit() const;

  TcpRingOptions options_;
  int rank_ = 0, size_ = 1;
  int to_successor_ = -1, from_predecessor_ = -1;  // sockets; -1 for a ring of one
  std::string successor_address_, predecessor_address_;
  std::vector<char> scratch_;  // one piece, being received before it is reduced
  std::string broken_;         // why the ring no longer works (set by a failed call)
};

}  // namespace ts::distributed
