#include "reports/rank_clocks.h"

#include <algorithm>
#include <optional>

namespace ts::reports {

RankClocks::RankClocks(std::span<const store::RankClockRow> rows) {
  std::map<int64_t, std::optional<vocabulary::ClockOffset>> start, end;
  for (const auto& r : rows) {
    const vocabulary::ClockOffset o{r.offset_ns, r.uncertainty_ns, r.at_ns, r.min_round_trip_ns,
                                    static_cast<int>(r.pings)};
    if (r.phase == "start") start[r.rank] = o;
    else if (r.phase == "end") end[r.rank] = o;
  }
  for (const auto& [rank, s] : start) {
    const auto e = end.find(rank);
    models_[rank] = vocabulary::clock_model(*s, e != end.end() ? e->second : std::nullopt);
  }
  // A rank measured at the end alone (its start's pings gave nothing): that offset, no drift.
  for (const auto& [rank, e] : end) {
    if (!models_.count(rank)) models_[rank] = vocabulary::clock_model(*e);
  }
}

int64_t RankClocks::to_rank0(int64_t rank, int64_t t_ns) const {
  const auto it = models_.find(rank);
  return it == models_.end() ? t_ns : it->second.to_reference(t_ns);
}

int64_t RankClocks::uncertainty_ns(int64_t rank) const {
  const auto it = models_.find(rank);
  return it == models_.end() ? 0 : it->second.uncertainty_ns;
}

int64_t RankClocks::max_uncertainty_ns() const {
  int64_t worst = 0;
  for (const auto& [_, m] : models_) worst = std::max(worst, m.uncertainty_ns);
  return worst;
}

}  // namespace ts::reports
