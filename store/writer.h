#pragma once
// Writer: creates / opens a trainscope database and appends runs to it.
// Not thread-safe: use one Writer per thread (several processes may share a file; SQLite locks).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "store/error.h"
#include "store/records.h"

namespace ts::store {

class Writer {
 public:
  // Creates the file (and its parent directory) when missing and sets up the schema. An existing
  // file must be ours (or empty); an older schema is migrated in one transaction. Foreign or newer
  // files throw StoreError (not_trainscope / newer_schema) and are left untouched.
  // Another process's write lock is waited for up to `lock_wait` (with a progress line on
  // stderr after 2 s); past it a write throws StoreError of kind busy.
  explicit Writer(const std::filesystem::path& path, std::chrono::milliseconds lock_wait = std::chrono::seconds(60));
  ~Writer();
  Writer(Writer&&) noexcept;
  Writer& operator=(Writer&&) noexcept;

  // Validates `path` as a write target without creating or writing anything. Throws StoreError.
  static void check_target(const std::filesystem::path& path);

  // SQLite's quick_check of the open db, once per file per process (it reads the whole file:
  // 0.4 s for a 110 MB db cached, 3 s from disk): StoreError of kind corrupt, naming the first
  // problem, before anything is written into a damaged file.
  void check_integrity();
  // Throws StoreError (kind io) when the path no longer names the file this Writer opened (it
  // was deleted, or replaced by another file): what it wrote would go to a file no one sees.
  void require_same_file() const;

  // Status running, committed at once; returns the run id. `id` > 0 asks for that id (import).
  // `info.global_batch_size` 0 is stored as batch_size * ranks.
  int64_t begin_run(const RunInfo& info, int64_t id = 0);
  // Streaming: what a running run measured since its last flush, with its heartbeat, in one transaction.
  void flush(int64_t run, const RunFlush& rows);
  // The run's memory timeline so far (streamed in pieces) replaced by `rows` (the whole run's):
  // every rank's timeline, or with `rank` only that rank's (rows should then be that rank's).
  void replace_memory_timeline(int64_t run, std::span<const MemoryPoint> rows,
                               std::optional<int64_t> rank = std::nullopt);

  // Groups every write until commit() into one transaction (BEGIN IMMEDIATE: the lock is taken
  // at once); without commit() its destructor rolls everything back. Not nestable.
  class Transaction {
   public:
    explicit Transaction(Writer& writer);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

   private:
    Writer& writer_;
    bool done_ = false;
  };
  void finish_run(int64_t run, RunStatus status, std::string_view ended_at, std::string_view error);
  // As finish_run, but only while the run is still `running`; false when it was already finished.
  bool finish_if_running(int64_t run, RunStatus status, std::string_view ended_at, std::string_view error);
  void delete_run(int64_t run);  // removes the run and all its rows; not_found when missing

  // Each call is transactional per chunk of kChunkRows rows; a missing run throws not_found.
  void add_environment(int64_t run, std::span<const EnvEntry> rows);  // same key again: replaced
  void add_iterations(int64_t run, std::span<const IterationRow> rows);
  void add_phases(int64_t run, std::span<const PhaseRow> rows);
  void add_events(int64_t run, std::span<const EventRow> rows);
  void add_layers(int64_t run, std::span<const LayerRow> rows);
  void add_op_summary(int64_t run, std::span<const OpSummaryRow> rows);
  void add_memory_timeline(int64_t run, std::span<const MemoryPoint> rows);
  void add_memory_peak(int64_t run, std::span<const MemoryPeakRow> rows);
  // The memory ledger's changes with their owners (schema v5), category and owner interned.
  void add_memory_changes(int64_t run, std::span<const MemoryChangeRow> rows);
  void add_metrics(int64_t run, std::span<const MetricRow> rows);
  void add_samples(int64_t run, std::span<const SampleRow> rows);
  // The GPU profiler's records (schema v2).
  void add_gpu_activities(int64_t run, std::span<const GpuActivityRow> rows);
  void add_gpu_breakdown(int64_t run, std::span<const GpuBreakdownRow> rows);
  void add_rank_clocks(int64_t run, std::span<const RankClockRow> rows);
  // Every collective call's split per rank (v13); a run's rows are written once, together.
  void add_collective_waits(int64_t run, std::span<const CollectiveWaitRow> rows);
  void add_copy_summary(int64_t run, std::span<const CopySummaryRow> rows);
  // Distribution (schema v4): collective calls (streamed in RunFlush too), the per-rank
  // nccl-tests-style summary, the per-rank per-iteration breakdown (v6: with a parameter-server
  // worker's pull and push waits), a collectives benchmark.
  void add_collectives(int64_t run, std::span<const CollectiveRow> rows);
  void add_comm_ops(int64_t run, std::span<const CommOpRow> rows);
  void add_rank_breakdown(int64_t run, std::span<const RankBreakdownRow> rows);
  void add_collective_bench(int64_t run, std::span<const CollectiveBenchRow> rows);
  // Every timed call of a benchmark row, per rank (schema v12).
  void add_collective_bench_samples(int64_t run, std::span<const CollectiveBenchSamplesRow> rows);
  // Parameter servers (schema v6): the staleness histograms and the server shards' totals.
  // Rows are stored as given (each row's rank is the producer's: the worker, the hosting rank).
  void add_ps_staleness(int64_t run, std::span<const PsStalenessRow> rows);
  void add_ps_servers(int64_t run, std::span<const PsServerRow> rows);
  // Projections (schema v15): the parameters whose gradients the run's backward produces, stored as
  // given (read back by rank, group, slot); and a projection's link to its inputs, for `row.run_id`
  // (the projection's own run: not_found when missing; `row.id` is ignored): returns the row's id.
  // The input ids are stored as given, unchecked.
  void add_gradients(int64_t run, std::span<const GradientRow> rows);
  int64_t add_projection(const ProjectionRow& row);

  static constexpr size_t kChunkRows = 50'000;

 private:
  // Runs `write` inside the open Transaction, or in one of its own.
  void in_one_transaction(const std::function<void()>& write);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ts::store
