#pragma once
// Analyses over GPU activities (docs/formulas.md, "GPU time breakdown"): the per-iteration
// breakdown of device time as Holistic Trace Analysis defines it, a kernel summary like
// `nsys stats` (cuda_gpu_kern_sum), a copy summary (cuda_gpu_mem_time_sum), per-layer GPU time
// and the device memory CUPTI saw. Pure functions: tests feed them hand-made activities.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "profiler/analysis.h"
#include "profiler/gpu_activity.h"

namespace ts::profiler {

// One iteration on one device. Its span runs from the first start to the last end of the
// device activities launched in that iteration (HTA's per-iteration window); within it:
// compute = |U compute kernels|, comm = |U communication| (kernels, copies and sets launched
// from a communication range), memcpy = |U other copies|, memset = |U other sets|,
// overlap = |U compute n U comm|, exposed_comm = comm - overlap, busy = |U all of them|,
// idle = span - busy. Unions run across streams.
struct GpuBreakdown {
  int16_t device = 0;
  int32_t iteration = 0;  // -1 in a total over iterations
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  int64_t memcpy_ns = 0;
  int64_t memset_ns = 0;
  int64_t overlap_ns = 0;
  int64_t exposed_comm_ns = 0;
  int64_t busy_ns = 0;
  int64_t idle_ns = 0;
  int64_t span_ns() const { return end_ns - start_ns; }
  double busy_fraction() const {
    return span_ns() > 0 ? static_cast<double>(busy_ns) / static_cast<double>(span_ns()) : 0.0;
  }
  double overlap_fraction() const {
    return comm_ns > 0 ? static_cast<double>(overlap_ns) / static_cast<double>(comm_ns) : 0.0;
  }
};

// Sorted by (device, iteration); activities launched outside any iteration (-1) or in
// iterations `counted` rejects are left out.
std::vector<GpuBreakdown> gpu_breakdown(std::span<const GpuActivity> activities,
                                        const IterationFilter& counted = all_iterations);
// The sums over `per_iteration` (for one device): spans add up; iteration = -1, start = 0, end = sum of spans.
GpuBreakdown total(std::span<const GpuBreakdown> per_iteration);

// Per kernel name (compute and communication kernels) over counted iterations: count, total,
// mean, median, min, max of the kernel durations; sorted by total descending.
std::vector<OpStat> kernel_summary(std::span<const GpuActivity> activities, const NameLookup& lookup,
                                   const IterationFilter& counted = all_iterations);

// Per copy or set name ("Memcpy HtoD", "Memset"...): count, bytes, time, and the bandwidth
// bytes / total time. Communication's copies and sets (staging) are in it too.
struct CopyStat {
  std::string name;
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t total_ns = 0;
  double gb_per_s() const { return total_ns > 0 ? static_cast<double>(bytes) / static_cast<double>(total_ns) : 0.0; }
};
std::vector<CopyStat> copy_summary(std::span<const GpuActivity> activities, const NameLookup& lookup,
                                   const IterationFilter& counted = all_iterations);

// Per layer: the device time (sum of durations of kernels, copies and sets) its ops launched,
// split by pass, and how many activities; in order of each layer's first launch. Layer 0 left out.
struct GpuLayerTime {
  StringId layer = 0;
  std::string name;
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
  int64_t other_ns = 0;
  int64_t activities = 0;
};
std::vector<GpuLayerTime> gpu_layer_times(std::span<const GpuActivity> activities, const NameLookup& lookup,
                                          const IterationFilter& counted = all_iterations);

// Device memory as CUPTI's allocation records show it, per device: the live bytes over time
// (the running sum of +allocated / -freed), its peak and when, and what is live at the end.
struct GpuMemoryTrace {
  int16_t device = 0;
  int64_t peak_bytes = 0;
  int64_t peak_ns = 0;
  int64_t final_bytes = 0;
  int64_t allocations = 0;
  int64_t frees = 0;
};
std::vector<GpuMemoryTrace> gpu_memory(std::span<const GpuActivity> activities);

}  // namespace ts::profiler
