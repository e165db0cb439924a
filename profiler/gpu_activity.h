#pragma once
// The GPU side of the event model: one record per activity CUPTI reports (kernel, copy, set,
// synchronisation, runtime API call, memory allocation or free, CUPTI overhead),
// already attributed to the op, layer, pass and iteration that launched it (and to communication
// when a communication range launched it; launch_context.h). The CUPTI tracer
// (cupti_tracer.cpp) produces them; tests build them by hand. Times are on the CPU tracer's
// clock (now_ns), so CPU and GPU events share one timeline.
#include <cstdint>
#include <optional>
#include <string_view>

#include "profiler/event.h"

namespace ts::profiler {

enum class GpuKind : uint8_t {
  kernel,  // a compute kernel
  comm,    // device work (kernel, copy, set) launched from a communication range: the `comm` of
           // the time breakdown; which work it was is in GpuActivity::comm_work
  memcpy,
  memset,
  sync,      // a synchronisation the CPU waited on (stream, event, context, device)
  api,       // a CUDA runtime/driver API call on a CPU thread (`stream` holds the OS thread id)
  marker,    // an NVTX range (`stream` holds the OS thread id): the store's vocabulary; our tracer
             // collects none (docs/decisions.md, "NVTX ranges reach Nsight, not our trace")
  memory,    // an allocation (bytes > 0) or free (bytes < 0) seen by CUPTI; start == end
  overhead,  // time CUPTI itself spent (buffer flushes, instrumentation)
};

std::string_view to_string(GpuKind kind);
std::optional<GpuKind> parse_gpu_kind(std::string_view s);

struct GpuActivity {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  StringId name = 0;    // kernel name (demangled), "Memcpy HtoD" (as Kineto names copies), API function
  StringId detail = 0;  // grid/block for kernels, copy kind, memory kind; 0 = none
  StringId layer = 0;   // layer (owner path) of the op that launched it; 0 = none
  StringId op = 0;      // the op that launched it; 0 = launched outside any op
  GpuKind kind = GpuKind::kernel;
  // For kind comm, what the device did (kernel, memcpy or memset): a staging copy is
  // communication in the breakdown and still a copy in the copy summary.
  GpuKind comm_work = GpuKind::kernel;
  Pass pass = Pass::none;
  int16_t device = 0;
  int32_t iteration = -1;    // the training iteration in which it was launched
  uint32_t stream = 0;       // CUDA stream id (api, marker: OS thread id)
  uint32_t correlation = 0;  // CUPTI correlation id: links an API call to what it launched
  int64_t bytes = 0;         // memcpy/memset size; memory: +allocated / -freed
  int64_t duration_ns() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
};

// Whether an activity occupies the device (and so counts toward busy time): kernels, copies, sets.
inline bool occupies_device(GpuKind k) {
  return k == GpuKind::kernel || k == GpuKind::comm || k == GpuKind::memcpy || k == GpuKind::memset;
}

// What the device did: kernel, memcpy or memset for device work, communication included; the
// kind itself for the rest.
inline GpuKind device_work(const GpuActivity& a) { return a.kind == GpuKind::comm ? a.comm_work : a.kind; }

// Whether CUPTI left the record without a usable time, so that it must be left out (and counted):
// a forced flush (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) hands back records of work that has not
// finished, and CUPTI writes 0 (CUPTI_TIMESTAMP_UNKNOWN) where it could not time a kernel for
// want of device memory. Our timestamps come from now_ns(), which is never 0, so 0 is never a
// time. Interval records need a start, an end and end >= start; instantaneous ones (memory,
// marker) their one timestamp.
inline bool is_incomplete(const GpuActivity& a) {
  if (a.kind == GpuKind::memory || a.kind == GpuKind::marker) return a.start_ns == 0;
  return a.start_ns == 0 || a.end_ns == 0 || a.end_ns < a.start_ns;
}

}  // namespace ts::profiler
