#pragma once
// The CUPTI activity kinds the GPU tracer enables (CUDA builds only: this header needs CUPTI's).
// Its own file so that the choice can be tested without a GPU.
#include <cupti_activity.h>

#include <span>

namespace ts::profiler {

// In the order the tracer enables them. Never CUPTI_ACTIVITY_KIND_KERNEL (it serialises kernels:
// the concurrent kind instead) and never CUPTI_ACTIVITY_KIND_MARKER: NVTX ranges reach a tool only
// through NVTX_INJECTION64_PATH, which nothing of ours sets, and the CPU tracer already has our
// own ranges on the same clock (docs/decisions.md, "NVTX ranges reach Nsight, not our trace").
std::span<const CUpti_ActivityKind> cupti_activity_kinds();

}  // namespace ts::profiler
