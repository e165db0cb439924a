#pragma once
// The spread of a collectives benchmark's timed calls (docs/formulas.md, "Collectives benchmark:
// percentiles, stragglers, spikes"): from every rank's time of every timed call of one row
// (store::CollectiveBenchSamplesRow), the median and 99th percentile of the calls' times (a
// call's time: the longest of its ranks' times), per call the rank that took longest and the rank
// that came in last, and the ranks' calls far above the median (spikes). Pure: the benchmark computes it for what it
// prints and stores, `show` from the stored calls.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/records.h"

namespace ts::reports {

// A call is a spike when it took more than this many times the row's median.
inline constexpr double kSpikeFactor = 3.0;

struct BenchSpread {
  int64_t samples = 0;  // timed calls over every rank
  int64_t calls = 0;    // calls every rank timed (the k-th call of each rank is one call)
  // Over those calls, each the longest of its ranks' times (quantile(), type 7); -1 without calls.
  double p50_ns = -1, p99_ns = -1;
  int64_t ranks = 0;  // ranks with samples (indexes of the vectors below: rank numbers)
  // Per rank: the calls in which its time was the longest (ties: the lowest rank), and the calls
  // it came in last to (its arrival, its own time since the barrier before the timed calls, the
  // latest; calls no rank came in strictly last to, as the first, count for none).
  std::vector<int64_t> longest, last_in;
  int64_t longest_rank = -1, last_in_rank = -1;  // the rank of each most often; -1: none
  // Spikes: a rank's call above kSpikeFactor x p50.
  int64_t spikes = 0;
  std::vector<int64_t> spikes_by_rank;
  double worst_ratio = 0;  // the longest call / p50 (0 without samples)
  int64_t worst_rank = -1, worst_call = -1;
};

// One row's calls: one entry per rank (any order; a rank's series in call order). Ranks are
// numbered 0..N-1 by their `rank`; a rank missing is counted as one without samples.
BenchSpread bench_spread(std::span<const store::CollectiveBenchSamplesRow> per_rank,
                         double spike_factor = kSpikeFactor);

// Every row of a run's stored calls, grouped by (collective, bytes).
std::map<std::pair<std::string, int64_t>, BenchSpread> bench_spreads(
    const std::vector<store::CollectiveBenchSamplesRow>& rows, double spike_factor = kSpikeFactor);

}  // namespace ts::reports
