#pragma once
// The TCP rate of the link between two ranks' hosts: the collectives benchmark's reference for
// busbw when its ranks span hosts (docs/distributed.md, "Collectives benchmark"). One TCP stream,
// plain sockets with the kernel's default buffers, from rank `from` to rank `to`, sending for
// `duration`; the receiver times it from its first read to the end of the stream, so the bytes
// queued in the sender's buffer when it stops are counted in the time they take to arrive. The
// receiver listens on every IPv4 address of its host and tells the sender these; the sender
// tries them in order (each connect bounded) and uses the first that connects. Every wait is
// bounded (connect, accept, each read): a link that does not carry TCP gives a reason, never a hang.
#include <chrono>
#include <cstdint>
#include <string>

#include "distributed/communicator.h"

namespace ts::distributed {

struct LinkRate {
  bool measured = false;
  std::string why_not;           // when not measured
  int from = 0, to = 0;          // ranks
  std::string address;           // the receiver's address the stream went to ("10.99.0.12:41234")
  int64_t bytes = 0;             // received after the first read
  int64_t ns = 0;                // from the end of the first read to the end of the stream
  double gbps = 0;               // bytes / ns: GB/s (1e9 bytes per second), as busbw
  std::string describe() const;  // "rank 0 -> rank 1 (10.99.0.12:41234): 119.6 MB in 1.00 s, 0.120 GB/s"
};

// Collective over `comm` (every rank calls it with the same arguments and gets the same result):
// `from` and `to` measure, the others wait for the result. `from` != `to`.
LinkRate measure_tcp_rate(Communicator& comm, int from, int to, std::chrono::milliseconds duration);

}  // namespace ts::distributed
