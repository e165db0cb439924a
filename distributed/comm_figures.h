#pragma once
// Communication figures as nccl-tests defines them (its doc/PERFORMANCE.md): for a call moving
// S bytes in t seconds, algbw = S / t, and busbw = algbw * factor, where factor makes the figure
// comparable with the hardware's peak whatever the number of ranks n (vocabulary/bus_factor.h
// defines it: 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter with S the whole
// gathered/scattered buffer, 1 for broadcast). docs/formulas.md, "Communication".
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace ts::distributed {

double bus_factor(Collective c, int ranks);
// GB/s (1e9 bytes per second, as nccl-tests prints them); 0 when `ns` is 0.
double algbw_gbps(int64_t bytes, int64_t ns);
double busbw_gbps(Collective c, int ranks, int64_t bytes, int64_t ns);

// The calls of one collective and size on one rank, summarised.
struct CommOpStat {
  Collective collective = Collective::barrier;
  int64_t bytes = 0;  // per call
  int64_t count = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0;
  double mean_ns = 0;
  double algbw_gbps = 0, busbw_gbps = 0;  // from the mean time
};

// Grouped by (collective, bytes), in that order.
std::vector<CommOpStat> summarise(std::span<const CollectiveRecord> records, int ranks);

}  // namespace ts::distributed
