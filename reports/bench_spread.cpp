#include "reports/bench_spread.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "reports/statistics.h"

namespace ts::reports {

namespace {

// The rank holding the most; -1 when every count is 0; ties: the lowest rank.
int64_t most(const std::vector<int64_t>& counts) {
  int64_t best = -1, best_count = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > best_count) best = static_cast<int64_t>(r), best_count = counts[r];
  }
  return best;
}

}  // namespace

BenchSpread bench_spread(std::span<const store::CollectiveBenchSamplesRow> per_rank, double spike_factor) {
  if (!(spike_factor > 1)) throw std::invalid_argument("bench_spread: the spike factor must be above 1");
  BenchSpread s;
  int64_t ranks = 0;
  for (const auto& r : per_rank) {
    if (r.rank < 0) throw std::invalid_argument("bench_spread: a negative rank");
    ranks = std::max(ranks, r.rank + 1);
  }
  s.ranks = ranks;
  std::vector<const std::vector<int64_t>*> series(static_cast<size_t>(ranks), nullptr);
  for (const auto& r : per_rank) {
    series[static_cast<size_t>(r.rank)] = &r.time_ns;
    s.samples += static_cast<int64_t>(r.time_ns.size());
  }
  s.longest.assign(static_cast<size_t>(ranks), 0);
  s.last_in.assign(static_cast<size_t>(ranks), 0);
  s.spikes_by_rank.assign(static_cast<size_t>(ranks), 0);
  // Calls every rank timed: the shortest series (a missing rank has none).
  size_t calls = ranks > 0 ? SIZE_MAX : 0;
  for (const auto* v : series) calls = std::min(calls, v ? v->size() : size_t{0});
  s.calls = static_cast<int64_t>(calls);
  if (calls == 0) return s;

  std::vector<double> call_ns(calls);                           // each call's time: its slowest rank's
  std::vector<int64_t> arrival(static_cast<size_t>(ranks), 0);  // each rank's own time since the barrier
  for (size_t i = 0; i < calls; ++i) {
    size_t longest = 0, last = 0;
    bool strictly_last = false;
    for (size_t r = 1; r < series.size(); ++r) {
      if ((*series[r])[i] > (*series[longest])[i]) longest = r;
      if (arrival[r] > arrival[last]) last = r;
    }
    for (size_t r = 0; r < series.size(); ++r) strictly_last |= r != last && arrival[r] < arrival[last];
    ++s.longest[longest];
    call_ns[i] = static_cast<double>((*series[longest])[i]);
    if (strictly_last) ++s.last_in[last];
    for (size_t r = 0; r < series.size(); ++r) arrival[r] += (*series[r])[i];
  }
  s.longest_rank = most(s.longest);
  s.last_in_rank = most(s.last_in);
  s.p50_ns = quantile(call_ns, 0.5);
  s.p99_ns = quantile(std::move(call_ns), 0.99);

  // Spikes over every call of every rank (a rank's calls past `calls` included) against p50.
  for (size_t r = 0; r < series.size(); ++r) {
    if (!series[r]) continue;
    for (size_t i = 0; i < series[r]->size(); ++i) {
      const auto t = static_cast<double>((*series[r])[i]);
      if (t > spike_factor * s.p50_ns) {
        ++s.spikes;
        ++s.spikes_by_rank[r];
      }
      const double ratio = s.p50_ns > 0 ? t / s.p50_ns : 0;
      if (ratio > s.worst_ratio) {
        s.worst_ratio = ratio;
        s.worst_rank = static_cast<int64_t>(r);
        s.worst_call = static_cast<int64_t>(i);
      }
    }
  }
  return s;
}

std::map<std::pair<std::string, int64_t>, BenchSpread> bench_spreads(
    const std::vector<store::CollectiveBenchSamplesRow>& rows, double spike_factor) {
  std::map<std::pair<std::string, int64_t>, std::vector<store::CollectiveBenchSamplesRow>> grouped;
  for (const auto& r : rows) grouped[{r.collective, r.bytes}].push_back(r);
  std::map<std::pair<std::string, int64_t>, BenchSpread> out;
  for (const auto& [key, per_rank] : grouped) out.emplace(key, bench_spread(per_rank, spike_factor));
  return out;
}

}  // namespace ts::reports
