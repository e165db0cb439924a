#pragma once
// The bus factor of nccl-tests (its doc/PERFORMANCE.md): busbw = algbw x factor makes a
// collective's bandwidth comparable with the hardware's peak whatever the number of ranks n:
// 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter (the whole gathered or
// scattered buffer), 1 for broadcast, 0 for what moves no data (a barrier, an unknown name).
// Defined here once, by the collective's name as stored ("all_reduce", ...): the distributed
// layer (distributed/comm_figures.h) and the readers of stored calls (reports/) both use it.
#include <cstdint>
#include <string_view>

namespace ts::vocabulary {

inline double bus_factor(std::string_view collective, int64_t ranks) {
  if (ranks <= 0) return 0.0;
  const double n = static_cast<double>(ranks);
  if (collective == "all_reduce") return 2.0 * (n - 1) / n;
  if (collective == "all_gather" || collective == "reduce_scatter") return (n - 1) / n;
  if (collective == "broadcast") return 1.0;
  return 0.0;
}

}  // namespace ts::vocabulary
