#pragma once
// Writer: creates / opens a trainscope database and appends runs to it.
// Not thread-safe: use one Writer per thread (several processes may share a file; SQLite locks).
#include <cstdint>
#include <filesystem>
#include <memory>
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
  explicit Writer(const std::filesystem::path& path);
  ~Writer();
  Writer(Writer&&) noexcept;
  Writer& operator=(Writer&&) noexcept;

  // Validates `path` as a write target without creating or writing anything. Throws StoreError.
  static void check_target(const std::filesystem::path& path);

  int64_t begin_run(const RunInfo& info);  // status running, committed at once; returns the run id
  void finish_run(int64_t run, RunStatus status, std::string_view ended_at, std::string_view error);
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
  void add_metrics(int64_t run, std::span<const MetricRow> rows);
  void add_samples(int64_t run, std::span<const SampleRow> rows);
  // The GPU profiler's records (schema v2).
  void add_gpu_activities(int64_t run, std::span<const GpuActivityRow> rows);
  void add_gpu_breakdown(int64_t run, std::span<const GpuBreakdownRow> rows);
  void add_copy_summary(int64_t run, std::span<const CopySummaryRow> rows);

  static constexpr size_t kChunkRows = 50'000;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ts::store
