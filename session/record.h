#pragma once
// Turns what a run measured (loop results, tracer events, the memory ledger, samples) into
// the store's rows: the one place where profiler/memprof results meet the store's records.
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "collectors/environment.h"
#include "collectors/measurement_conditions.h"
#include "collectors/process_sampler.h"
#include "distributed/communicator.h"
#include "engine/nn/module.h"
#include "memprof/ledger.h"
#include "profiler/analysis.h"
#include "profiler/event.h"
#include "profiler/gpu_tracer.h"
#include "profiler/roofline.h"
#include "store/records.h"
#include "store/writer.h"
#include "workloads/training_loop.h"

namespace ts::session {

std::vector<store::EnvEntry> to_env_rows(const std::vector<collectors::Entry>& entries);
// The tracer's events as the store's event rows, and the phase events among them as phase rows.
void append_event_rows(std::span<const profiler::Event> events, const profiler::NameLookup& lookup,
                       std::vector<store::PhaseRow>& phases, std::vector<store::EventRow>& rows);
// Ledger snapshots as timeline rows: one per category per snapshot.
void append_memory_points(const std::vector<memprof::Snapshot>& snapshots, std::vector<store::MemoryPoint>& rows);
store::IterationRow to_iteration_row(const workloads::IterationResult& it);

// At most this many of a rank's memory changes are stored, the first ones (docs/schema.md,
// memory_changes). Measured: a change costs about 44 bytes of db (row and index), so this caps a
// rank's at about 85 MB, and what was live at the last of them takes about 2 s to sum on two
// shared cores; resnet50 makes 1,880 changes per iteration (tiny or small alike), so about 1,000
// iterations fit, and the ledger holds the log in memory anyway (24 bytes a change).
inline constexpr size_t kMaxStoredMemoryChanges = 2'000'000;
// The ledger's changes after `cursor`, at most `max` of them, as the store's rows of `rank`.
std::vector<store::MemoryChangeRow> memory_change_rows(const memprof::Ledger& ledger,
                                                       memprof::Ledger::ChangeCursor& cursor, size_t max,
                                                       int64_t rank = 0);
// The metrics saying how many of the `logged` changes were stored (`kept`, the first ones) and
// how many were dropped: memory_changes_stored, memory_changes_dropped.
std::vector<store::MetricRow> memory_change_counts(size_t logged, size_t kept, int64_t rank = 0);
// Stores the ledger's change log as `rank`'s, the first `limit` changes, in pieces (a long log is
// never in memory twice over); returns memory_change_counts.
std::vector<store::MetricRow> store_memory_changes(store::Writer& writer, int64_t run, const memprof::Ledger& ledger,
                                                   int64_t rank = 0, size_t limit = kMaxStoredMemoryChanges);
// The step's roofline (profiler/roofline.h) as metrics, totals over the counted iterations:
// roofline_step_ns, roofline_iterations, roofline_<class>_{ns,flops,bytes,calls} for compute,
// memory, reorder and other, roofline_data_ns and roofline_overhead_ns (docs/formulas.md). None
// when no op declared any work (an untraced run).
std::vector<store::MetricRow> roofline_metrics(const profiler::Roofline& r);
// What the machine gave the run (docs/formulas.md, "Measurement conditions") as whole-run
// metrics named conditions_*; `processes_on_host`: the job's processes on this host (its other
// ranks there count among the other processes).
std::vector<store::MetricRow> condition_metrics(const collectors::MeasurementConditions& c, int processes_on_host);
// The ledger's breakdown at its peak, one row per category.
std::vector<store::MemoryPeakRow> memory_peak_rows(const memprof::Snapshot& peak);
// A communicator's recorded calls as the store's collective rows.
void append_collective_rows(const std::vector<distributed::CollectiveRecord>& records,
                            std::vector<store::CollectiveRow>& rows);
// The per-iteration communication breakdown of this process's events (counted iterations only),
// with a parameter-server worker's pull and push waits.
std::vector<store::RankBreakdownRow> rank_breakdown_rows(std::span<const profiler::Event> events,
                                                         const profiler::IterationFilter& counted);
// The iterations a run's figures count: every one the loop ran but its warm-up; work outside any
// iteration (-1) never counts. The one filter for every rank's figures.
profiler::IterationFilter counted_iterations(const workloads::LoopResult& loop);
// A GPU trace's time split per device and counted iteration (profiler::gpu_breakdown) as the
// store's rows, rank 0's: a rank other than 0 sends them to rank 0, which stamps its rank.
std::vector<store::GpuBreakdownRow> gpu_breakdown_rows(const profiler::GpuTrace& trace,
                                                       const profiler::IterationFilter& counted);
// A communicator's calls summarised per collective and size, as nccl-tests reports them.
std::vector<store::CommOpRow> comm_op_rows(const std::vector<distributed::CollectiveRecord>& records,
                                           std::string_view backend, int ranks);

// What record() writes: everything (a run stored at its end, or spilled to a side file), or
// what a RunStream did not (the summaries; rank 0's streamed memory timeline replaced by its whole
// run's, the other ranks' left as they streamed it). Both write rank 0's memory change log (the
// other ranks' arrive in their final message).
enum class RecordScope { everything, after_streaming };

class RunRecorder {
 public:
  RunRecorder(store::Writer& writer, int64_t run_id) : writer_(writer), run_(run_id) {}
  void set_parameter_count(int64_t n) { parameter_count_ = n; }
  // What the workload's samples and tokens are (the throughput metrics' units and headline).
  void set_units(workloads::ThroughputUnits units) { units_ = std::move(units); }
  // `model` may be null (the model failed to build); `quality` may be null.
  void record(const workloads::LoopResult& loop, const std::vector<profiler::Event>& events,
              const engine::nn::Module* model, const std::vector<collectors::Sample>& samples,
              const workloads::Quality* quality, RecordScope scope);
  // What the GPU tracer saw (GPU runs with tracing on): stored by record() with its analyses.
  void set_gpu_trace(profiler::GpuTrace trace) { gpu_ = std::move(trace); }
  // A whole-run figure measured outside the loop (the device allocator's peaks...), stored with the rest.
  void add_metric(store::MetricRow m) { extra_metrics_.push_back(std::move(m)); }

 private:
  // record_gpu.cpp: the GPU activities, breakdown, kernel and copy summaries, the per-layer GPU
  // time (into `layers`), the tracer's own figures (dropped and incomplete records...), the trace
  // checks against the loop's iterations (profiler/trace_checks.h) and add_metric()'s as metrics.
  void add_gpu_layer_times(std::vector<store::LayerRow>& layers, const profiler::IterationFilter& counted,
                           double timed) const;
  void record_gpu(const workloads::LoopResult& loop, const profiler::IterationFilter& counted,
                  std::vector<store::MetricRow>& metrics);
  void record_gpu_devices(const profiler::IterationFilter& counted, std::vector<store::MetricRow>& metrics);
  // The memory timeline, peak and change log; returns the peak, `change_counts` the log's counts.
  memprof::Snapshot record_memory(const workloads::LoopResult& loop, bool everything,
                                  std::vector<store::MetricRow>& change_counts);
  std::optional<profiler::GpuTrace> gpu_;
  std::vector<store::MetricRow> extra_metrics_;
  store::Writer& writer_;
  int64_t run_;
  int64_t parameter_count_ = 0;
  workloads::ThroughputUnits units_;
};

}  // namespace ts::session
