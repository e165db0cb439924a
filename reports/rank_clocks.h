#pragma once
// The ranks' clocks of a stored run, mapped onto rank 0's (issue 41): what every reader that sets
// two ranks' times side by side (the chrome trace, the viewer's timeline, the collectives'
// waiting and moving) maps them with, and the uncertainty it states beside them. Built from the
// run's rank_clocks rows (store v11; vocabulary/clock_alignment.h): a rank without rows (rank 0,
// a single process, a run stored before v11) keeps its own times, and says it is not measured.
#include <cstdint>
#include <map>
#include <span>

#include "store/records.h"
#include "vocabulary/clock_alignment.h"

namespace ts::reports {

class RankClocks {
 public:
  RankClocks() = default;
  explicit RankClocks(std::span<const store::RankClockRow> rows);

  // Rank `rank`'s time `t_ns` on rank 0's clock.
  int64_t to_rank0(int64_t rank, int64_t t_ns) const;
  // Whether `rank`'s clock was measured against rank 0's (rank 0's own: trivially).
  bool measured(int64_t rank) const { return rank == 0 || models_.count(rank) > 0; }
  // The bound on a mapped time's error (0 for rank 0 and for ranks not measured, which are not mapped).
  int64_t uncertainty_ns(int64_t rank) const;
  // The largest bound over the ranks: what a side-by-side view of all of them is good to.
  int64_t max_uncertainty_ns() const;
  const std::map<int64_t, vocabulary::ClockModel>& models() const { return models_; }

 private:
  std::map<int64_t, vocabulary::ClockModel> models_;  // measured ranks other than 0
};

}  // namespace ts::reports
