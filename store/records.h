#pragma once
// Plain record types exchanged with the store. Times are nanoseconds on the run's clock
// (steady clock, origin chosen by the producer); durations are end_ns - start_ns.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ts::store {

enum class RunStatus { running, completed, failed, interrupted };
std::string_view to_string(RunStatus);
std::optional<RunStatus> parse_run_status(std::string_view);

struct RunInfo {  // known when the run starts
  std::string workload, preset, device;
  int64_t batch_size = 0, iterations = 0, warmup = 0, threads = 0;
  uint64_t seed = 0;
  bool trace = true;
  int64_t parameter_count = 0;
  std::string started_at;  // ISO 8601 UTC, e.g. 2026-11-22T04:30:00Z
  std::string command_line;
  std::string config_json;  // run config + preset hyper-parameter table, as JSON text
  // Who writes the run (schema v3), so readers can tell a live run from a dead one.
  std::string host, boot_id;          // hostname; /proc/sys/kernel/random/boot_id
  int64_t pid = 0, pid_start = 0;     // the writing process and its start time (/proc/PID/stat field 22)
  int64_t heartbeat_interval_ms = 0;  // how often the writer promises a heartbeat (0: none)
  // Distribution (schema v4): one run is one row with `ranks` processes; rank 0 writes every
  // rank's records. batch_size is per rank; global_batch_size (0: batch_size * ranks, filled in
  // by the writer) is what one iteration of the whole run processes.
  int64_t ranks = 1;
  int64_t global_batch_size = 0;
  // The run's identity (schema v9), kept by every copy and spill of it: what import matches on.
  // Empty: the writer makes one (store::new_run_uuid).
  std::string uuid;
  // What trained (schema v14; issue 42): "trainscope" (its own engine; every run before v14) or
  // the framework a run was imported from ("pytorch": its profiler's trace).
  std::string framework = "trainscope";
};
struct RunRow : RunInfo {
  int64_t id = 0;
  RunStatus status = RunStatus::running;
  int64_t heartbeat_ms = 0;  // Unix time (ms) of the writer's last flush; 0: never
  // Unix time (ms, the writer's clock) of the last flush that brought new iterations, and how
  // long the writer said the run may go without one (schema v9; 0: not recorded).
  int64_t progress_ms = 0, stall_after_ms = 0;
  std::string ended_at;
  std::string error;
  // Not stored: when the db file (or its WAL) was last written, by this host's file system,
  // as the reader found it (Unix ms; 0: unknown). A witness of writes beside the heartbeat.
  int64_t db_written_ms = 0;
};
struct EnvEntry {
  std::string key, value;
};
struct IterationRow {
  int64_t index = 0;
  bool warmup = false;
  int64_t start_ns = 0, end_ns = 0;
  int64_t samples = 0;
  double loss = 0;
  int64_t rank = 0;
};
struct PhaseRow {
  int64_t iteration = 0;
  std::string phase;
  int64_t start_ns = 0, end_ns = 0;
  int64_t rank = 0;
};
struct EventRow {
  int64_t start_ns = 0, end_ns = 0;
  std::string name, layer, kind, pass;
  int64_t iteration = -1;
  int64_t thread = 0;
  int64_t rank = 0;
};
// An event with its strings as the store's string ids (Reader::event_ids, Reader::strings): what
// an analysis over every event of a rank reads without a string per row. Two events with equal
// ids have equal strings; `kind` is the id of its kind's name ("op", "comm", ...).
struct EventIdRow {
  int64_t start_ns = 0, end_ns = 0;
  int64_t name = 0, layer = 0, kind = 0, pass = 0;
  int64_t iteration = -1;
  int64_t thread = 0;
};
struct LayerRow {
  std::string layer;
  std::string op_types;
  int64_t calls = 0;
  double forward_ns = 0, backward_ns = 0;
  int64_t activation_bytes = 0;
  int64_t parameter_count = 0;
  double gpu_forward_ns = 0, gpu_backward_ns = 0;  // device time its ops launched (GPU runs)
  double median_per_iteration_ns = -1;             // forward + backward, median over iterations (v7; -1: unknown)
  std::vector<int64_t> per_iteration_ns;           // forward + backward in each timed iteration (v8; empty: unknown)
};
// total_ns and the statistics: self time; inclusive_ns: with what the op ran (v5; 0 in older files).
struct OpSummaryRow {
  std::string device, name;
  int64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns = 0, median_ns = 0;
  int64_t min_ns = 0, max_ns = 0;
  int64_t inclusive_ns = 0;
  double median_per_iteration_ns = -1;    // self time, median over the timed iterations (v7; -1: unknown)
  std::vector<int64_t> per_iteration_ns;  // self time in each timed iteration, in order (v8; empty: unknown)
};

// A per-iteration series as stored (v8): whole numbers of ns, comma-separated. decode_series
// takes what encode_series wrote; anything else reads as no series (empty).
std::string encode_series(const std::vector<int64_t>& values);
std::vector<int64_t> decode_series(std::string_view text);
struct MemoryPoint {
  int64_t t_ns = 0;
  std::string category;
  int64_t live_bytes = 0;
  int64_t rank = 0;
};
struct MemoryPeakRow {
  std::string category;
  int64_t bytes = 0;
  int64_t t_ns = 0;
  int64_t rank = 0;
};
// The memory ledger's change log (schema v5): one allocation (delta > 0) or free (delta < 0) of
// a category under its owner (a layer path or a parameter's name, "" for none), on the rank's clock.
struct MemoryChangeRow {
  int64_t t_ns = 0;
  std::string category, owner;
  int64_t delta = 0;
  int64_t rank = 0;
};
// What was live at a time, per category and owner: the sum of the changes up to it.
struct MemoryLiveRow {
  std::string category, owner;
  int64_t bytes = 0;
};
struct MetricRow {
  std::string name;
  double value = 0;
  std::string unit;
  int64_t iteration = -1; /* -1: whole run */
  int64_t rank = 0;
};
// GPU profiler (schema v2). kind: kernel, comm, memcpy, memset, sync, api, marker, memory, overhead.
struct GpuActivityRow {
  int64_t start_ns = 0, end_ns = 0;
  std::string kind, name, detail, layer, op, pass;
  int64_t device = 0, stream = 0, correlation = 0, iteration = -1, bytes = 0;
};
// Per device and counted iteration (docs/formulas.md, "GPU time breakdown"); `rank` (v10): whose
// GPU it is (every rank traces its own; rows before v10 are rank 0's).
struct GpuBreakdownRow {
  int64_t device = 0, iteration = 0, start_ns = 0, end_ns = 0;
  int64_t compute_ns = 0, comm_ns = 0, memcpy_ns = 0, memset_ns = 0, overlap_ns = 0, exposed_comm_ns = 0, busy_ns = 0,
          idle_ns = 0;
  int64_t rank = 0;
};
struct CopySummaryRow {
  std::string device, name;
  int64_t count = 0, bytes = 0, total_ns = 0;
};

// Distribution (schema v4). `rank` on the per-rank records above says whose they are (0 in a
// single-process run); run-level records without one (layers, kernel summary, GPU activities and
// copies) are rank 0's.
// collective: all_reduce, broadcast, all_gather, reduce_scatter, barrier; backend: mpi, nccl.
// One collective call on a rank's thread (streamed, like events); bytes: the call's buffer size.
struct CollectiveRow {
  int64_t rank = 0, iteration = -1, thread = 0;
  std::string collective, label;  // label: what it carried, e.g. "bucket 3"
  int64_t bytes = 0, start_ns = 0, end_ns = 0;
};
// A rank's calls of one collective at one size, summarised as nccl-tests reports them (GB/s):
// algbw = bytes / mean time; busbw = algbw * 2(n-1)/n (all_reduce), (n-1)/n (all_gather,
// reduce_scatter), 1 (broadcast), n = ranks.
struct CommOpRow {
  int64_t rank = 0;
  std::string backend, collective;
  int64_t bytes = 0, ranks = 0, count = 0, total_ns = 0;
  double mean_ns = 0;
  int64_t min_ns = 0, max_ns = 0;
  double algbw_gbps = 0, busbw_gbps = 0;
};
// A rank's clock against rank 0's, measured at the run's start or end (v11; vocabulary/
// clock_alignment.h): offset = the rank's clock minus rank 0's at rank 0's time at_ns, true
// within +- uncertainty_ns; from `pings` ping-pongs, the fastest taking min_round_trip_ns.
// Rank 0 stores one row per other rank and phase; the rows of a run give each rank's ClockModel.
struct RankClockRow {
  int64_t rank = 0;
  std::string phase;  // "start" | "end"
  int64_t offset_ns = 0, uncertainty_ns = 0, at_ns = 0, min_round_trip_ns = 0, pings = 0;
};
// One collective call on one rank, split into waiting and moving (schema v13; issue 41;
// reports/collective_split.h derives them when a multi-rank run has been stored): the call is the
// `call`-th (from 0) of (iteration, collective, label) on every rank; times on rank 0's clock
// (the run's rank_clocks), good to +- uncertainty_ns; waiting = last_arrival_ns - arrival_ns
// clamped to the rank's call, moving = the rest of it; last_rank arrived last (the straggler).
struct CollectiveWaitRow {
  int64_t rank = 0, iteration = -1;
  std::string collective, label;
  int64_t call = 0, bytes = 0, arrival_ns = 0, last_arrival_ns = 0, last_rank = -1;
  int64_t waiting_ns = 0, moving_ns = 0, uncertainty_ns = 0;
};
// A rank's time in one iteration, split as the time breakdown splits it (DESIGN, "Time breakdown");
// backward_wait_ns: how long the optimizer waited for gradients' communication after backward.
// Parameter-server runs (v6): pull_wait_ns, how long the worker waited for parameters it pulled
// (its forward's layers, the step's start); push_wait_ns, for its pushes to be taken.
struct RankBreakdownRow {
  int64_t rank = 0, iteration = 0, start_ns = 0, end_ns = 0;
  int64_t compute_ns = 0, comm_ns = 0, overlap_ns = 0, exposed_comm_ns = 0, idle_ns = 0, backward_wait_ns = 0;
  int64_t pull_wait_ns = 0, push_wait_ns = 0;
};
// One line of a collectives benchmark (a run whose workload is "collectives"): time_ns is the
// mean per call over `iterations` calls. v12: bus_factor (busbw / algbw, comm_figures.h; rows
// before v12 read it as busbw / algbw of the row, 0 where algbw is 0), the median and 99th
// percentile of the timed calls, a call's time the longest of its ranks' (p50_ns, p99_ns), and
// how many calls every rank's were in all (`samples`: ranks x iterations); -1 and 0 samples: rows
// before v12, whose calls were not kept.
struct CollectiveBenchRow {
  std::string backend, collective;
  int64_t bytes = 0, ranks = 0, iterations = 0;
  double time_ns = 0, algbw_gbps = 0, busbw_gbps = 0;
  int64_t min_time_ns = 0, max_time_ns = 0;
  double bus_factor = 0;
  double p50_ns = -1, p99_ns = -1;
  int64_t samples = 0;
  // v15: what the calls take from compute beside them: a few more calls with a busy thread beside
  // them on every rank (as a rank's backward computes while its buckets are reduced), the rate
  // that thread kept as a share of its rate with no call beside it (1: nothing taken), and those
  // calls' mean time. -1: not measured.
  double beside_rate = -1, beside_ns = -1;
};
// The time of every timed call of one collective benchmark row on one rank, in call order (v12):
// the row is the run's (collective, bytes), which a sweep measures once.
struct CollectiveBenchSamplesRow {
  std::string collective;
  int64_t bytes = 0, rank = 0;
  std::vector<int64_t> time_ns;
};
// Parameter server (schema v6). How stale the gradients a server applied were, counted per worker
// (`rank`) and its iteration: kind "updates", the key's updates between the worker's read of the
// value and the gradient's update (0 in sync mode); kind "clock_gap", at each read the server
// answered, how many steps the reader was ahead of the slowest worker (bounded mode's bound).
struct PsStalenessRow {
  int64_t rank = 0, iteration = -1;
  std::string kind;
  int64_t staleness = 0, count = 0;
};
// One server shard over the run: where it ran, what it held, what crossed it, how busy it was.
// queue: the messages waiting for it, sampled each time it takes one.
struct PsServerRow {
  int64_t server = 0, rank = 0, keys = 0, bytes_held = 0;
  int64_t bytes_in = 0, bytes_out = 0, pushes = 0, pulls = 0, updates = 0, busy_ns = 0;
  int64_t queue_max = 0;
  double queue_mean = 0;
};
// A parameter whose gradient a run's backward produces (schema v15): what a projection of the run
// onto several ranks packs into buckets. Its readiness in each iteration is an event ("gradient ready").
struct GradientRow {
  int64_t group = 0;  // the workload's gradient group
  int64_t slot = 0;   // index within the group, registration order
  std::string name;   // the parameter's path
  int64_t bytes = 0;  // the gradient's size
  int64_t rank = 0;
};
// A projected distributed iteration (schema v15; issue 44): the projection is a run row of its own
// (framework "projection") and this row links it to its inputs, with the link model it used and,
// when the multi-rank run it projects was measured, how far off it was (the error ledger). The
// input ids are plain ids, not references: a deleted input leaves its ledger rows (readers check
// the run still exists).
struct ProjectionRow {
  int64_t id = 0;               // assigned by the store
  int64_t run_id = 0;           // the projection's own run row (framework "projection")
  int64_t source_run_id = 0;    // the one-rank run projected
  int64_t sweep_run_id = 0;     // the collectives sweep the link model came from; 0: none
  int64_t measured_run_id = 0;  // the multi-rank run it is checked against; 0: none
  std::string strategy;         // "allreduce" or "ps"
  int64_t ranks = 0;
  std::string link;  // the link as described to the user
  double latency_ns = 0, bandwidth_gbps = 0;
  std::string knobs_json, model_json;  // the options projected; the link model and assumptions in full
  double projected_ns = 0;             // median projected iteration time
  double measured_ns = -1;             // the measured run's median iteration time; -1: not measured
  std::optional<double> error;         // projected / measured - 1
  std::string created_at;              // ISO 8601 UTC
};
struct SampleRow {
  int64_t t_ns = 0;
  std::string name;
  double value = 0;
  int64_t rank = 0;
};  // system samplers (rss, cpu%)

// What a running run measured since its last flush: written in one transaction together with
// the run's heartbeat, so a run killed at any moment keeps every flush before it.
struct RunFlush {
  std::vector<IterationRow> iterations;
  std::vector<PhaseRow> phases;
  std::vector<EventRow> events;
  std::vector<MemoryPoint> memory;
  std::vector<SampleRow> samples;
  std::vector<CollectiveRow> collectives;
  int64_t heartbeat_ms = 0;  // Unix time (ms); 0: leave the run's heartbeat as it is
  // The run advanced (new iterations) as of this flush: RunRow's progress_ms and stall_after_ms (0: leave them).
  int64_t progress_ms = 0, stall_after_ms = 0;
  bool empty() const {
    return iterations.empty() && phases.empty() && events.empty() && memory.empty() && samples.empty() &&
           collectives.empty();
  }
};

}  // namespace ts::store
