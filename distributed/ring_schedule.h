#pragma once
// The schedule both rings of our own run (ring_all_reduce.h over MPI's messages, tcp_ring.h
// over plain sockets): a ring reduce-scatter and then a ring all-gather, the bandwidth-optimal
// all-reduce of Patarasuk and Yuan (each rank sends and receives 2(n-1)/n of the buffer, both
// ways at once), and the reduction a received piece goes through.
//
// The buffer is cut into n segments as evenly as they go. In step t (of 2(n-1)) a rank sends one
// segment to its successor (rank + 1) and receives one from its predecessor (rank - 1); in the
// first n - 1 steps the received one is reduced into its own (reduce-scatter), in the last n - 1
// it replaces it (all-gather). The segment a rank sends in step t + 1 is the one it received in
// step t, so a piece can go on as soon as it has arrived (and been reduced).
#include <cstddef>
#include <vector>

#include "distributed/communicator.h"

namespace ts::distributed {

// The first element of segment `s` (0..n; s == n: `count`) when `count` elements are cut into
// `n` segments as evenly as they go.
size_t segment_begin(size_t count, int n, int s);

struct RingStep {
  int send_segment = 0, recv_segment = 0;
  bool reduce = false;  // the received segment is reduced into ours (else it replaces ours)
};
// Rank `me`'s 2(n - 1) steps in a ring of `n` ranks (none for n == 1).
std::vector<RingStep> ring_steps(int n, int me);

// `into`[i] = op(`into`[i], `from`[i]) for `n` elements of `type`.
void reduce_into(void* into, const void* from, size_t n, DataType type, ReduceOp op);

}  // namespace ts::distributed
