#pragma once
// The CUPTI activity kinds the GPU tracer enables (CUDA builds only: this header needs CUPTI's).
// Its own file so that the choice can be tested without a GPU.
#include <cupti_activity.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ts::profiler {

// In the order the tracer enables them. Never CUPTI_ACTIVITY_KIND_KERNEL (it serialises kernels:
// the concurrent kind instead) and never CUPTI_ACTIVITY_KIND_MARKER: NVTX ranges reach a tool only
// through NVTX_INJECTION64_PATH, which nothing of ours sets, and the CPU tracer already has our
// own ranges on the same clock (docs/decisions.md, "NVTX ranges reach Nsight, not our trace").
std::span<const CUpti_ActivityKind> cupti_activity_kinds();

// What each kind costs is measured by leaving kinds out (TS_CUPTI_LEAVE_OUT, docs/gpu-machine.md):
// the kinds above less those named in `leave_out`, comma-separated, among memcpy, memset,
// synchronization, runtime, driver, external_correlation, memory, overhead (the kernels cannot be
// left out: without them there is no trace). Throws std::invalid_argument naming an unknown or
// refused name. A trace made so is incomplete: the tracer's status says which kinds were left out.
std::vector<CUpti_ActivityKind> cupti_activity_kinds_without(std::string_view leave_out);
// The names cupti_activity_kinds_without() takes, in the tracer's order ("kernel" first).
std::string cupti_kind_name(CUpti_ActivityKind kind);

}  // namespace ts::profiler
