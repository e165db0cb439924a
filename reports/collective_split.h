#pragma once
// Every collective call split, per rank, into waiting and moving (issue 41, item 2): a rank that
// enters an all-reduce early spends the time until the last rank arrives waiting for it (skew),
// and only the time after that moving data. With the ranks' times on rank 0's clock
// (reports/rank_clocks.h), a call's arrivals on every rank can be set side by side: waiting =
// the last arrival minus this rank's, moving = this rank's end minus the last arrival; the last
// to arrive is the call's straggler. Both are good to twice the clocks' bound (two ranks'
// times meet in each). Pure but for store_collective_waits: tests feed it rows.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "reports/rank_clocks.h"
#include "store/records.h"

namespace ts::reports {

// One call as every rank made it: the k-th call of (iteration, collective, label) on each rank.
struct CollectiveCall {
  int64_t iteration = -1;
  std::string collective, label;
  int64_t call = 0;  // which call of (iteration, collective, label), from 0: the same on every rank
  int64_t bytes = 0;
  int64_t last_rank = -1;                      // the straggler: the rank that arrived last
  int64_t last_arrival_ns = 0;                 // on rank 0's clock
  std::vector<int64_t> arrival_ns;             // indexed by rank, on rank 0's clock
  std::vector<int64_t> waiting_ns, moving_ns;  // indexed by rank
};

struct CollectiveCalls {
  std::vector<CollectiveCall> calls;  // by iteration, then the first arrival
  int64_t incomplete = 0;             // calls some rank has no row for (left out)
  int64_t uncertainty_ns = 0;         // twice the clocks' largest bound
};

// `rows`: every rank's collective calls; `ranks`: the run's. Calls outside an iteration (-1) are
// left out, as are all of them when a rank's clock was not measured (the ranks' times cannot be
// set side by side: the result is empty).
CollectiveCalls split_collectives(std::span<const store::CollectiveRow> rows, const RankClocks& clocks, int64_t ranks);

// The split as stored (schema v13): a row per call and rank, and back. `from_rows` leaves out a
// call some rank has no row for (counted in `incomplete`); calls in the split's order.
std::vector<store::CollectiveWaitRow> to_rows(const CollectiveCalls& calls);
CollectiveCalls from_rows(std::span<const store::CollectiveWaitRow> rows, int64_t ranks);

// Splits a stored multi-rank run's collectives and writes the rows (one transaction), unless the
// run has some already. Returns how many rows were written (0: one rank, clocks not measured, no
// calls, or already there). Throws store::StoreError.
int64_t store_collective_waits(const std::filesystem::path& db, int64_t run);

// Per rank over the calls of the iterations `timed` keeps: waiting and moving per iteration, how
// often it was the last to arrive, and how long the others waited for it then (per iteration).
struct RankWaitMove {
  int64_t rank = 0;
  double waiting_ms = 0, moving_ms = 0;  // per timed iteration
  int64_t last_arrivals = 0;             // calls it was the straggler of
  double others_waited_ms = 0;           // per timed iteration: the others' waiting in those calls
  // The moving part's bus bandwidth (GB/s): every call's bytes times its bus factor
  // (vocabulary/bus_factor.h) over the time this rank spent moving; 0 without moving time.
  double moving_busbw_gbps = 0;
};
std::vector<RankWaitMove> wait_move_by_rank(const CollectiveCalls& calls, std::span<const int64_t> timed,
                                            int64_t ranks);

}  // namespace ts::reports
