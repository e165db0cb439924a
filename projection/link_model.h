#pragma once
// The link a projection sends its collectives over: fitted to a stored collectives benchmark
// (`trainscope bench collectives`, a sweep of all-reduce sizes across the link), or nominal, from a
// rate alone. docs/projection.md, "The link model".
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/reader.h"
#include "store/records.h"

namespace ts::projection {

struct LinkModel {
  std::string source;       // how it was made, for the user: "sweep run 12 (all_reduce, 2 ranks, 7 sizes)"
  int64_t sweep_run = 0;    // 0: nominal
  int64_t sweep_ranks = 2;  // the ranks the sweep measured (the fit holds for them)
  // t(bytes) = latency_ns + bytes / (algbw_gbps): all-reduce over sweep_ranks, least squares in
  // relative error over the sizes of 64 KiB and more.
  double latency_ns = 0;
  double algbw_gbps = 0;  // GB/s = bytes per ns
  // The measured all-reduce times (bytes, ns) at sweep_ranks, by size: interpolated between, so
  // that sizes the shaper lets through in a burst keep their measured time.
  std::vector<std::pair<int64_t, double>> all_reduce_table;
  // One message one way while the other way is busy too (a parameter server's pushes and
  // answers): half the all-reduce's latency and its bus bandwidth.
  double p2p_latency_ns = 0;
  double p2p_gbps = 0;
  // What an all-reduce takes from compute beside it on the sweep's cores: the rate a busy thread
  // kept beside it (the sweep's beside_rate, by size, at most 1). Empty: not measured (sweeps
  // before schema v15, a nominal link): taken as nothing.
  std::vector<std::pair<int64_t, double>> beside_rate_table;
  // And the calls' own pace beside it: their time alone over their time beside the busy thread.
  std::vector<std::pair<int64_t, double>> beside_pace_table;
  // The cores each rank of the sweep had (its machine's over the ranks on it; 0: unknown).
  double sweep_cores_per_rank = 0;

  double bus_gbps() const;  // algbw x the all-reduce's bus factor at sweep_ranks
  // An all-reduce of `bytes` over `ranks` ranks. Other rank counts than the sweep's scale by the
  // ring's terms: latency with (n-1), bytes with the bus factor 2(n-1)/n.
  double all_reduce_ns(int64_t bytes, int64_t ranks) const;
  double p2p_ns(int64_t bytes) const;
  double beside_rate(int64_t bytes) const;  // in (0, 1], interpolated by size (the nearest outside the sizes)
  double beside_pace(int64_t bytes) const;  // in (0, 1], as beside_rate; 1 where not measured
  // The share of a core an all-reduce of `bytes` keeps busy, as the busy thread's loss implies:
  // one thread and the call on the sweep's cores c kept the rate c / (1 + share) (the scheduler's
  // fair share) where they wanted more than c. 0 where nothing was lost or nothing measured.
  double cpu_share(int64_t bytes) const;
};

// Fits the all-reduce rows of a collectives benchmark run (rows of one backend and rank count).
// Throws std::invalid_argument when it holds fewer than two all-reduce sizes of 64 KiB or more.
LinkModel fit_link_model(int64_t sweep_run, const std::vector<store::CollectiveBenchRow>& rows);
// As fit_link_model, from the stored sweep run (its rows, and its cores per rank: the machine's
// logical cores over its ranks_per_machine). Throws std::invalid_argument for a run that is not a
// collectives benchmark or holds too few sizes.
LinkModel load_link_model(store::Reader& reader, int64_t sweep_run);

// A link known by its rate alone (bits per second): one TCP stream's share of it (measured on the
// shaped namespace links, docs/netns-hosts.md) and a nominal latency; said to be nominal.
LinkModel nominal_link(double bits_per_s);

// "100mbit", "1gbit", "2.5gbit", "10gbit", "125mbps" (tc's units: bit and bps = bytes per second,
// k/m/g decimal): bits per second. nullopt for anything else.
std::optional<double> parse_link_rate(std::string_view text);

}  // namespace ts::projection
