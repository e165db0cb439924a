#include "reports/collective_split.h"

#include "store/reader.h"
#include "store/writer.h"
#include "vocabulary/bus_factor.h"
#include "vocabulary/collective_wait.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace ts::reports {

CollectiveCalls split_collectives(std::span<const store::CollectiveRow> rows, const RankClocks& clocks, int64_t ranks) {
  CollectiveCalls out;
  if (ranks < 2) return out;
  for (int64_t r = 0; r < ranks; ++r) {
    if (!clocks.measured(r)) return out;
  }
  out.uncertainty_ns = 2 * clocks.max_uncertainty_ns();
  // (iteration, collective, label) -> per rank, its calls' rows in the order they began.
  using Key = std::tuple<int64_t, std::string, std::string>;
  std::map<Key, std::vector<std::vector<const store::CollectiveRow*>>> by_key;
  for (const auto& c : rows) {
    if (c.iteration < 0 || c.rank < 0 || c.rank >= ranks) continue;
    auto& per_rank = by_key[{c.iteration, c.collective, c.label}];
    per_rank.resize(static_cast<size_t>(ranks));
    per_rank[static_cast<size_t>(c.rank)].push_back(&c);
  }
  for (auto& [key, per_rank] : by_key) {
    size_t most = 0, least = std::numeric_limits<size_t>::max();
    for (auto& calls : per_rank) {
      std::sort(calls.begin(), calls.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
      most = std::max(most, calls.size());
      least = std::min(least, calls.size());
    }
    out.incomplete += static_cast<int64_t>(most - least);
    for (size_t k = 0; k < least; ++k) {
      CollectiveCall call;
      std::tie(call.iteration, call.collective, call.label) = key;
      call.call = static_cast<int64_t>(k);
      std::vector<int64_t> arrival(static_cast<size_t>(ranks)), end(static_cast<size_t>(ranks));
      for (int64_t r = 0; r < ranks; ++r) {
        const auto* c = per_rank[static_cast<size_t>(r)][k];
        arrival[static_cast<size_t>(r)] = clocks.to_rank0(r, c->start_ns);
        end[static_cast<size_t>(r)] = clocks.to_rank0(r, c->end_ns);
        call.bytes = std::max(call.bytes, c->bytes);
        if (call.last_rank < 0 || arrival[static_cast<size_t>(r)] > call.last_arrival_ns) {
          call.last_rank = r;
          call.last_arrival_ns = arrival[static_cast<size_t>(r)];
        }
      }
      call.arrival_ns = arrival;
      for (int64_t r = 0; r < ranks; ++r) {
        const auto part =
            vocabulary::wait_move(arrival[static_cast<size_t>(r)], end[static_cast<size_t>(r)], call.last_arrival_ns);
        call.waiting_ns.push_back(part.waiting_ns);
        call.moving_ns.push_back(part.moving_ns);
      }
      out.calls.push_back(std::move(call));
    }
  }
  std::stable_sort(out.calls.begin(), out.calls.end(), [](const CollectiveCall& a, const CollectiveCall& b) {
    return std::tie(a.iteration, a.last_arrival_ns) < std::tie(b.iteration, b.last_arrival_ns);
  });
  return out;
}

std::vector<store::CollectiveWaitRow> to_rows(const CollectiveCalls& calls) {
  std::vector<store::CollectiveWaitRow> rows;
  for (const auto& c : calls.calls) {
    for (size_t r = 0; r < c.waiting_ns.size(); ++r) {
      rows.push_back({static_cast<int64_t>(r), c.iteration, c.collective, c.label, c.call, c.bytes, c.arrival_ns[r],
                      c.last_arrival_ns, c.last_rank, c.waiting_ns[r], c.moving_ns[r], calls.uncertainty_ns});
    }
  }
  return rows;
}

CollectiveCalls from_rows(std::span<const store::CollectiveWaitRow> rows, int64_t ranks) {
  CollectiveCalls out;
  if (ranks < 2) return out;
  using Key = std::tuple<int64_t, std::string, std::string, int64_t>;
  std::map<Key, std::vector<const store::CollectiveWaitRow*>> by_call;
  for (const auto& w : rows) {
    if (w.rank < 0 || w.rank >= ranks) continue;
    auto& per_rank = by_call[{w.iteration, w.collective, w.label, w.call}];
    per_rank.resize(static_cast<size_t>(ranks));
    per_rank[static_cast<size_t>(w.rank)] = &w;
    out.uncertainty_ns = std::max(out.uncertainty_ns, w.uncertainty_ns);
  }
  for (const auto& [key, per_rank] : by_call) {
    if (std::any_of(per_rank.begin(), per_rank.end(), [](auto* w) { return w == nullptr; })) {
      ++out.incomplete;
      continue;
    }
    CollectiveCall call;
    std::tie(call.iteration, call.collective, call.label, call.call) = key;
    call.bytes = per_rank.front()->bytes;
    call.last_rank = per_rank.front()->last_rank;
    call.last_arrival_ns = per_rank.front()->last_arrival_ns;
    for (const auto* w : per_rank) {
      call.arrival_ns.push_back(w->arrival_ns);
      call.waiting_ns.push_back(w->waiting_ns);
      call.moving_ns.push_back(w->moving_ns);
    }
    out.calls.push_back(std::move(call));
  }
  std::stable_sort(out.calls.begin(), out.calls.end(), [](const CollectiveCall& a, const CollectiveCall& b) {
    return std::tie(a.iteration, a.last_arrival_ns) < std::tie(b.iteration, b.last_arrival_ns);
  });
  return out;
}

int64_t store_collective_waits(const std::filesystem::path& db, int64_t run) {
  std::vector<store::CollectiveWaitRow> rows;
  {
    store::Reader reader(db);
    const auto info = reader.run(run);
    if (!info || info->ranks < 2 || !reader.collective_waits(run).empty()) return 0;
    rows = to_rows(
        split_collectives(reader.collectives(run, std::nullopt), RankClocks(reader.rank_clocks(run)), info->ranks));
  }
  if (rows.empty()) return 0;
  store::Writer writer(db);
  store::Writer::Transaction tx(writer);
  writer.add_collective_waits(run, rows);
  tx.commit();
  return static_cast<int64_t>(rows.size());
}

std::vector<RankWaitMove> wait_move_by_rank(const CollectiveCalls& calls, std::span<const int64_t> timed,
                                            int64_t ranks) {
  std::vector<RankWaitMove> out;
  if (ranks < 2 || calls.calls.empty() || timed.empty()) return out;
  const std::set<int64_t> counted(timed.begin(), timed.end());
  std::vector<double> waiting(static_cast<size_t>(ranks)), moving(static_cast<size_t>(ranks)),
      others(static_cast<size_t>(ranks));
  std::vector<int64_t> last(static_cast<size_t>(ranks));
  double bus_bytes = 0;  // the same for every rank: each takes part in every call
  for (const auto& c : calls.calls) {
    if (!counted.contains(c.iteration)) continue;
    bus_bytes += static_cast<double>(c.bytes) * vocabulary::bus_factor(c.collective, ranks);
    double waited_for_last = 0;
    for (int64_t r = 0; r < ranks; ++r) {
      waiting[static_cast<size_t>(r)] += static_cast<double>(c.waiting_ns[static_cast<size_t>(r)]);
      moving[static_cast<size_t>(r)] += static_cast<double>(c.moving_ns[static_cast<size_t>(r)]);
      if (r != c.last_rank) waited_for_last += static_cast<double>(c.waiting_ns[static_cast<size_t>(r)]);
    }
    ++last[static_cast<size_t>(c.last_rank)];
    others[static_cast<size_t>(c.last_rank)] += waited_for_last;
  }
  const double per = 1e6 * static_cast<double>(counted.size());  // ns totals to ms per iteration
  for (int64_t r = 0; r < ranks; ++r) {
    const auto i = static_cast<size_t>(r);
    out.push_back({r, waiting[i] / per, moving[i] / per, last[i], others[i] / per,
                   moving[i] > 0 ? bus_bytes / moving[i] : 0.0});  // bytes per ns = GB/s
  }
  return out;
}

}  // namespace ts::reports
