#include "distributed/comm_figures.h"

#include <algorithm>
#include <map>
#include <utility>

#include "vocabulary/bus_factor.h"

namespace ts::distributed {

double bus_factor(Collective c, int ranks) { return vocabulary::bus_factor(to_string(c), ranks); }

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
