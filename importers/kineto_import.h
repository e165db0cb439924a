#pragma once
// A PyTorch profiler trace (Kineto's Chrome trace JSON, `.json` or `.json.gz`) read into the store
// as a run (issue 42, item 2): what the trace holds, mapped onto the store's records; what it does
// not hold is said to be absent, never stored as zero. Two streaming passes over the file (a
// survey, then the rows), so memory is bounded by what the survey keeps (the steps, the threads,
// a correlation id and step per kernel launch, the phase and layer ranges, a layer per autograd
// sequence number), the GPU's device work (for the breakdown) and the CPU ops (for the op and layer
// summaries), not by the file's other records.
//
// The mapping (docs/import.md):
// - `ProfilerStep#N` (user_annotation) ranges are iterations N (their CPU span); events are
//   given the iteration whose step range holds their start.
// - CPU ranges: `cpu_op` are ops, other `user_annotation` ranges (record_function) phases (but
//   PyTorch's own Optimizer./DDP ranges ops, its DataLoader's the data phase), ProfilerStep
//   iterations; `python_function` ranges are left out (counted): the Python stack, not work.
//   Threads (pid, tid) are numbered in order of appearance, their names kept. An op's pass is its
//   phase's (forward, backward); its layer the innermost `layer: NAME` / `nn.Module: NAME` range
//   holding it, or, for a backward node, its forward op's (by autograd sequence number). The op
//   summary and the layers over the timed steps, as trainscope's own runs.
// - The steps' work (ImportOptions: batch, or each step's samples and tokens) gives the rates of
//   the timed steps (importers/imported_steps.h).
// - GPU: `kernel` (HTA's rule: a name with "nccl" is communication), `gpu_memcpy`, `gpu_memset`,
//   `cuda_runtime` / `cuda_driver` (API calls), `cuda_sync`; each GPU activity takes the iteration
//   of the runtime call that launched it (by correlation), else of its own start.
// - `[memory]` instants: the allocator's totals per device as samples (`allocated_bytes`,
//   `reserved_bytes` on `cpu` or `cuda:N`); PyTorch's categories are not in the trace: they come
//   from its memory timeline where the caller has one (ImportOptions::memory_timeline), else
//   they are absent.
// - The GPU time breakdown per iteration and device, as Holistic Trace Analysis defines it
//   (profiler/gpu_analysis.h).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "importers/trace_records.h"
#include "nlohmann/json.hpp"
#include "store/records.h"
#include "vocabulary/rates.h"

namespace ts::importers {

// What is known of one profiler step beyond the trace (`trainscope run --framework pytorch` knows
// it from the script it ran): the samples and tokens it trained on and its loss.
struct StepFacts {
  int64_t samples = 0;
  int64_t tokens = 0;  // 0: none counted
  std::optional<double> loss;
};

struct ImportOptions {
  std::string workload;      // "" : the file's name without its extensions
  std::string preset = "-";  // what the user says it was; unknown by default
  int64_t batch_size = 0;    // samples per step, when the user says (0: unknown: no throughput)
  int64_t warmup_steps = 0;  // the first N steps (in time order) are warm-up: out of the figures
  // Per step, in time order (empty: batch_size samples each, no tokens, no loss); a step beyond
  // the list takes batch_size.
  std::vector<StepFacts> steps;
  vocabulary::RateUnits units;  // what the samples and tokens are
  std::string framework = "pytorch";
  int64_t threads = 0, parameter_count = 0;
  uint64_t seed = 0;
  nlohmann::json config = nlohmann::json::object();  // added to the run's stored config
  std::vector<store::EnvEntry> environment;          // added to the run's environment
  std::vector<store::MetricRow> metrics;             // added to the run's whole-run metrics
  // PyTorch's memory timeline of the same profile (export_memory_timeline's JSON), if there is
  // one: the memory by category (importers/pytorch_memory_timeline.h). Empty: none.
  std::filesystem::path memory_timeline;
  std::string command_line;  // how the import was asked for
  size_t batch = 8192;       // records per batch read
  // Called after every batch with the pass (1: survey, 2: rows) and the records read in it so far.
  std::function<void(int pass, int64_t records)> progress;
};

struct ImportedRun {
  int64_t run_id = 0;
  int64_t iterations = 0, cpu_events = 0, gpu_activities = 0, memory_samples = 0;
  int64_t ops = 0, layers = 0;      // distinct op names summarised, layers found
  bool memory_categories = false;   // PyTorch's memory timeline was read
  int64_t left_out = 0;             // records with no place in the store (flows, python stack, metadata)
  std::vector<std::string> absent;  // what the trace does not hold (said, never zero)
  std::string device;               // "cuda" when the trace has GPU activities, else "cpu"
};

// Reads `trace` and writes it into `db` as one completed run (framework "pytorch"). A trace that
// cannot be read (TraceError) leaves nothing in the db: the run is removed again.
ImportedRun import_kineto_trace(const std::filesystem::path& trace, const std::filesystem::path& db,
                                const ImportOptions& options);

}  // namespace ts::importers
