#pragma once
// Reader: read-only access to a trainscope database (used by the CLI, reports and the viewer).
// Opening checks ownership and version like Writer; a missing file throws StoreError(not_found).
// Rows come back in a stable order: runs by id, time series by time, summaries in insertion order.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/error.h"
#include "store/records.h"

namespace ts::store {

class Reader {
 public:
  explicit Reader(const std::filesystem::path& path);
  ~Reader();
  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;

  int schema_version() const;

  std::vector<RunRow> runs();  // ordered by id
  std::optional<RunRow> run(int64_t id);
  std::vector<EnvEntry> environment(int64_t run);  // insertion order
  // Per-rank records (schema v4): `rank` picks one rank's rows, 0 by default (a single-process
  // run's, and what every caller before v4 meant); std::nullopt: every rank's, ordered by rank
  // first, then as for one rank. Files before v4 hold rank 0's rows only.
  std::vector<IterationRow> iterations(int64_t run, std::optional<int64_t> rank = 0);  // by index
  // One rank's events of the named kinds ("op", "comm", "phase"...) with their strings as ids
  // (EventIdRow), by start, then insertion order (not the longer first, as events() does: that
  // sort costs more than the read; callers that nest events sort them): one pass over the rank's
  // rows in the (run_id, rank, start_ns) index's order, no string made per row. Kinds the db never
  // stored match nothing.
  std::vector<EventIdRow> event_ids(int64_t run, int64_t rank, const std::vector<std::string>& kinds);
  // The id of a stored string (nullopt: the db holds no such string), and the strings of ids
  // (ids that name none are left out).
  std::optional<int64_t> string_id(std::string_view value);
  std::map<int64_t, std::string> strings(const std::vector<int64_t>& ids);
  int64_t iteration_count(int64_t run, std::optional<int64_t> rank = 0);
  std::vector<PhaseRow> phases(int64_t run, std::optional<int64_t> rank = 0);  // by iteration, then start
  // Events whose start_ns lies in [from_ns, to_ns], ordered by start, then the longer first (an
  // enclosing range before what it contains, though it ended, and was streamed, later), then
  // insertion order; limit < 0: no limit (with every rank: the first `limit` in rank order).
  std::vector<EventRow> events(int64_t run, int64_t from_ns = std::numeric_limits<int64_t>::min(),
                               int64_t to_ns = std::numeric_limits<int64_t>::max(), int64_t limit = -1,
                               std::optional<int64_t> rank = 0);
  int64_t event_count(int64_t run, std::optional<int64_t> rank = 0);
  std::vector<std::pair<int64_t, int64_t>> event_counts_by_rank(int64_t run);  // (rank, events), by rank
  std::vector<int64_t> ranks_present(int64_t run);    // ranks with iterations or events, ascending
  std::vector<LayerRow> layers(int64_t run);          // insertion (model) order
  std::vector<OpSummaryRow> op_summary(int64_t run);  // insertion order
  std::vector<MemoryPoint> memory_timeline(int64_t run, std::optional<int64_t> rank = 0);  // by time
  std::vector<MemoryPeakRow> memory_peak(int64_t run, std::optional<int64_t> rank = 0);    // insertion order
  // The memory ledger's changes (schema v5; empty for older files and runs without them): by
  // time, then insertion order. memory_live_at: what was live at t_ns, the sum of the changes
  // at or before it per category and owner, zero sums left out, by bytes descending.
  std::vector<MemoryChangeRow> memory_changes(int64_t run, std::optional<int64_t> rank = 0);
  std::vector<MemoryLiveRow> memory_live_at(int64_t run, int64_t t_ns, int64_t rank = 0);
  std::vector<MetricRow> metrics(int64_t run, std::optional<int64_t> rank = 0);  // insertion order
  std::vector<SampleRow> samples(int64_t run, std::optional<int64_t> rank = 0);  // by time
  // GPU profiler (schema v2; empty for files of version 1). Activities as events() does.
  std::vector<GpuActivityRow> gpu_activities(int64_t run, int64_t from_ns = std::numeric_limits<int64_t>::min(),
                                             int64_t to_ns = std::numeric_limits<int64_t>::max(), int64_t limit = -1);
  int64_t gpu_activity_count(int64_t run);
  // Per rank (v10; before, every row is rank 0's) as the per-rank queries above: by device, iteration.
  std::vector<GpuBreakdownRow> gpu_breakdown(int64_t run, std::optional<int64_t> rank = 0);
  std::vector<CopySummaryRow> copy_summary(int64_t run);  // insertion order
  // Distribution (schema v4; empty for older files).
  std::vector<CollectiveRow> collectives(int64_t run, std::optional<int64_t> rank = std::nullopt);  // by start
  std::vector<CommOpRow> comm_ops(int64_t run);        // by rank, collective, bytes
  std::vector<RankClockRow> rank_clocks(int64_t run);  // by rank, phase ("end" before "start")
  // Every collective call's split per rank (v13), by iteration, collective, label, call, rank;
  // empty before v13 and for runs whose split was not written (reports split them on reading).
  std::vector<CollectiveWaitRow> collective_waits(int64_t run);
  // by rank, iteration; pull_wait_ns / push_wait_ns (v6) are 0 in older files
  std::vector<RankBreakdownRow> rank_breakdown(int64_t run);
  // insertion order; before v12 bus_factor is busbw / algbw (0 where algbw is 0), p50/p99 -1, samples 0
  std::vector<CollectiveBenchRow> collective_bench(int64_t run);
  // Each row's timed calls per rank (v12; empty for older files): by collective, bytes, rank.
  std::vector<CollectiveBenchSamplesRow> collective_bench_samples(int64_t run);
  // Parameter servers (schema v6; empty for older files and runs without them).
  std::vector<PsStalenessRow> ps_staleness(int64_t run);  // by kind, rank, iteration, staleness
  std::vector<PsServerRow> ps_servers(int64_t run);       // by server
  // Projections (schema v15; empty, or nullopt, for older files). The parameters whose gradients a
  // run's backward produces, per rank as the per-rank queries above: by group, slot.
  std::vector<GradientRow> gradients(int64_t run, std::optional<int64_t> rank = 0);
  std::vector<ProjectionRow> projections();  // every projection, by id
  // The projection whose own run is `projection_run` (several: the first written).
  std::optional<ProjectionRow> projection_of(int64_t projection_run);
  // The error ledger of a measured multi-rank run: the projections checked against it, by id.
  std::vector<ProjectionRow> projections_of_measured(int64_t measured_run);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ts::store
