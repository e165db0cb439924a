#pragma once
// The GPU tracer: CUPTI activity tracing of the whole process (concurrent kernels, copies,
// sets, synchronisation, runtime and driver API calls, device memory, CUPTI's own overhead)
// with every launch attributed to the op, layer, pass and iteration that made it (external
// correlation pushed by the range observer), and NVTX ranges for the run, the iterations and
// the phases so that Nsight Systems shows them too (CUPTI does not collect them: the CPU
// tracer has the same ranges on the same clock; docs/decisions.md).
//
// Built in every configuration: without CUDA, start() returns a tracer that traces nothing
// and says why. With CUDA, a CUPTI that another tool holds (nsys, ncu: CUDA 13 allows one
// subscriber) is not an error either: the run goes on with CPU-side tracing and NVTX ranges,
// and status() says so.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiler/gpu_activity.h"

namespace ts::profiler {

class Tracer;

struct GpuTrace {
  std::vector<GpuActivity> activities;  // sorted by start
  uint64_t dropped_records = 0;         // CUPTI's count over every context: stored and shown, never hidden
  uint64_t incomplete_records = 0;      // records without a usable time (is_incomplete): left out, counted
  uint64_t records = 0;                 // activity records read
  uint64_t buffers = 0;                 // buffers CUPTI handed back filled
  uint64_t buffer_bytes_peak = 0;       // most buffer memory held at once
  uint64_t unattributed_launches = 0;   // kernels/copies/sets launched outside any op
};

class GpuTracer {
 public:
  // Starts tracing, interning names in `tracer`. One GpuTracer at a time per process.
  static std::unique_ptr<GpuTracer> start(Tracer& tracer);
  virtual ~GpuTracer() = default;
  // Whether CUPTI activity tracing is on.
  virtual bool tracing() const = 0;
  // One line: what is traced, or why not.
  virtual const std::string& status() const = 0;
  // Unsets the range observer, stops pushing launch contexts, waits for the devices in use,
  // flushes every buffer, disables the activity kinds and finalizes CUPTI (so that work after
  // profiling runs at full speed). Returns the activities with their launch contexts; call once
  // (later calls return an empty trace). start() may be called again afterwards.
  virtual GpuTrace stop() = 0;
};

}  // namespace ts::profiler
