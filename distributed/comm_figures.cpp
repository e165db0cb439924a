#include "distributed/comm_figures.h"

#include <algorithm>
#include <map>
#include <utility>

namespace ts::distributed {

double bus_factor(Collective c, int ranks) {
  const double n = ranks;
  switch (c) {
    case Collective::all_reduce: return ranks > 0 ? 2.0 * (n - 1) / n : 0;
    case Collective::all_gather:
    case Collective::reduce_scatter: return ranks > 0 ? (n - 1) / n : 0;
    case Collective::broadcast: return 1.0;
    case Collective::barrier: return 0.0;
  }
  return 0.0;
}

double algbw_gbps(int64_t bytes, int64_t ns) {
  return ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0;
}

double busbw_gbps(Collective c, int ranks, int64_t bytes, int64_t ns) {
  return algbw_gbps(bytes, ns) * bus_factor(c, ranks);
}

std::vector<CommOpStat> summarise(std::span<const CollectiveRecord> records, int ranks) {
  std::map<std::pair<Collective, int64_t>, CommOpStat> by_key;
  for (const auto& r : records) {
    auto& s = by_key[{r.collective, r.bytes}];
    const int64_t d = r.end_ns - r.start_ns;
    if (s.count == 0) {
      s.collective = r.collective;
      s.bytes = r.bytes;
      s.min_ns = s.max_ns = d;
    }
    ++s.count;
    s.total_ns += d;
    s.min_ns = std::min(s.min_ns, d);
    s.max_ns = std::max(s.max_ns, d);
  }
  std::vector<CommOpStat> out;
  out.reserve(by_key.size());
  for (auto& [key, s] : by_key) {
    s.mean_ns = static_cast<double>(s.total_ns) / static_cast<double>(s.count);
    const auto mean = static_cast<int64_t>(s.mean_ns + 0.5);
    s.algbw_gbps = algbw_gbps(s.bytes, mean);
    s.busbw_gbps = busbw_gbps(s.collective, ranks, s.bytes, mean);
    out.push_back(s);
  }
  return out;
}

}  // namespace ts::distributed
