#pragma once
// Checks of a GPU trace against what the host knows, stored with every traced GPU run so that a
// trace that cannot be right says so (docs/formulas.md, "GPU trace checks"): kernels that start
// before their launch, device work outside the iteration that launched it, and the device time
// per iteration against CUDA events. Pure functions, tested on synthetic traces.
#include <cstddef>
#include <cstdint>
#include <span>

#include "profiler/analysis.h"
#include "profiler/gpu_activity.h"

namespace ts::profiler {

// A training iteration as the host saw it: its span [start_ns, end_ns] on now_ns's clock (the
// loop synchronises the device before end_ns) and the device time of its work from a CUDA-event
// pair on the engine's stream (-1: not measured).
struct IterationWindow {
  int32_t index = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t device_ns = -1;
};

// How many of the activities a check looked at failed it.
struct CheckCount {
  uint64_t failed = 0;
  uint64_t checked = 0;
  double fraction() const { return checked > 0 ? static_cast<double>(failed) / static_cast<double>(checked) : 0.0; }
};

// Device activities (kernels, copies, sets) that start before the runtime or driver API call with
// their correlation id (the earliest, when both record it). CPU and CUPTI share one clock, so
// there must be none. Checked: the device activities whose call is in the trace.
CheckCount starts_before_launch(std::span<const GpuActivity> activities);

// Device activities attributed to an iteration (GpuActivity::iteration) that do not lie within
// that iteration's window. Checked: those attributed to one of `iterations`.
CheckCount outside_iteration(std::span<const GpuActivity> activities, std::span<const IterationWindow> iterations);

// Per counted iteration with a device time (device_ns > 0) and device activities attributed to
// it: CUPTI's window, the end of its last device activity minus the iteration's start_ns (the
// device is idle then: the previous iteration synchronised), against the events' time,
// |window - device_ns| / device_ns. The largest and the median (the mean of the middle two for an
// even count) over the iterations compared; all 0 when none was.
struct EventTimeDifference {
  size_t iterations = 0;
  double max = 0;
  double median = 0;
};
EventTimeDifference event_time_difference(std::span<const GpuActivity> activities,
                                          std::span<const IterationWindow> iterations,
                                          const IterationFilter& counted = all_iterations);

}  // namespace ts::profiler
