#pragma once
// An all-reduce built from MPI's point-to-point messages: a ring reduce-scatter and then a ring
// all-gather (the bandwidth-optimal schedule of Patarasuk and Yuan, the one gloo and NCCL's
// rings run): each rank sends and receives 2(n-1)/n of the buffer, both ways at once, whatever
// n. An alternative to MPI_Allreduce on TCP for large buffers (TS_ALLREDUCE=ring;
// docs/distributed.md, "The ring all-reduce"), for the reason issue 41 measured:
// - MPI's waits spin: the communication thread of a data-parallel rank took about 0.2 CPU-s per
//   iteration from a backward it overlaps on 2 cores; here a wait sleeps between polls;
// - the pieces (at most `chunk_bytes`) are reduced as they arrive, while the next ones travel.
// Not the default: on a loaded 2-core machine its sleeping waits lost 5-10% of MPI_Allreduce's
// bus bandwidth at 16-64 MiB (a woken thread waits for a core).
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "distributed/communicator.h"

namespace ts::distributed {

// Waits for MPI requests without holding a core: it polls (MPI_Testsome, which also moves
// data), and while nothing completes sleeps between polls, at first briefly and then for up to
// a 32nd of the time waited so far, at most `max_sleep_us`: the wait ends at most that late,
// and a long wait costs a few hundred polls a second.
class PollingWait {
 public:
  explicit PollingWait(int64_t max_sleep_us = 200) : max_sleep_us_(max_sleep_us) {}
  // Returns the indices of `requests` that completed since the last call (at least one, unless
  // every request is already MPI_REQUEST_NULL: then none). Completed requests become null.
  std::span<const int> some(std::span<MPI_Request> requests);

 private:
  int64_t max_sleep_us_;
  std::vector<int> done_;
};

struct RingOptions {
  size_t chunk_bytes = size_t{1} << 20;  // pieces in flight: reduced as they arrive
  int tag = 0x5249;                      // the messages' tag on `comm` ("RI")
  int64_t max_sleep_us = 200;            // PollingWait's longest sleep
};

// Which all-reduce a host buffer of at least kRingMinBytes takes in MpiCommunicator:
// MPI_Allreduce (the default), the ring here over MPI's messages, or the ring over plain TCP
// sockets (tcp_ring.h), as the environment's TS_ALLREDUCE says ("mpi", "ring" or "tcp"; the
// launcher passes it to every rank). Smaller buffers always take MPI_Allreduce: their time is
// latency, which MPI's recursive doubling keeps lower, and their spinning waits are short.
enum class AllReduceAlgorithm { ring, mpi, tcp };
inline constexpr size_t kRingMinBytes = size_t{64} << 10;
// Throws std::invalid_argument on any other value than these.
AllReduceAlgorithm all_reduce_algorithm();
std::string_view to_string(AllReduceAlgorithm a);

// In place on `count` elements of `data`, every rank of `comm` with the same arguments. Every
// rank ends with the same values (each piece is reduced once, on one rank, and copied to the
// others). Throws DistError when an MPI call fails.
void ring_all_reduce(MPI_Comm comm, void* data, size_t count, DataType type, ReduceOp op,
                     const RingOptions& options = {});

}  // namespace ts::distributed
