#include "profiler/trace_checks.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

namespace ts::profiler {

CheckCount starts_before_launch(std::span<const GpuActivity> activities) {
  // A runtime call and the driver call it makes may share the correlation id: the earlier counts.
  std::unordered_map<uint32_t, int64_t> launch_start;
  for (const GpuActivity& a : activities) {
    if (a.kind != GpuKind::api || a.correlation == 0) continue;
    auto [it, fresh] = launch_start.try_emplace(a.correlation, a.start_ns);
    if (!fresh) it->second = std::min(it->second, a.start_ns);
  }
  CheckCount c;
  for (const GpuActivity& a : activities) {
    if (!occupies_device(a.kind)) continue;
    const auto it = launch_start.find(a.correlation);
    if (it == launch_start.end()) continue;
    ++c.checked;
    if (a.start_ns < it->second) ++c.failed;
  }
  return c;
}

CheckCount outside_iteration(std::span<const GpuActivity> activities, std::span<const IterationWindow> iterations) {
  std::unordered_map<int32_t, const IterationWindow*> by_index;
  for (const IterationWindow& w : iterations) by_index[w.index] = &w;
  CheckCount c;
  for (const GpuActivity& a : activities) {
    if (!occupies_device(a.kind)) continue;
    const auto it = by_index.find(a.iteration);
    if (it == by_index.end()) continue;
    ++c.checked;
    if (a.start_ns < it->second->start_ns || a.end_ns > it->second->end_ns) ++c.failed;
  }
  return c;
}

EventTimeDifference event_time_difference(std::span<const GpuActivity> activities,
                                          std::span<const IterationWindow> iterations, const IterationFilter& counted) {
  std::unordered_map<int32_t, int64_t> last_end;
  for (const GpuActivity& a : activities) {
    if (!occupies_device(a.kind)) continue;
    auto [it, fresh] = last_end.try_emplace(a.iteration, a.end_ns);
    if (!fresh) it->second = std::max(it->second, a.end_ns);
  }
  std::vector<double> diffs;
  for (const IterationWindow& w : iterations) {
    if (w.device_ns <= 0 || !counted(w.index)) continue;
    const auto it = last_end.find(w.index);
    if (it == last_end.end()) continue;
    const double window = static_cast<double>(it->second - w.start_ns);
    const double events = static_cast<double>(w.device_ns);
    diffs.push_back(std::abs(window - events) / events);
  }
  EventTimeDifference d;
  d.iterations = diffs.size();
  if (diffs.empty()) return d;
  std::sort(diffs.begin(), diffs.end());
  d.max = diffs.back();
  const size_t n = diffs.size();
  d.median = n % 2 == 1 ? diffs[n / 2] : (diffs[n / 2 - 1] + diffs[n / 2]) / 2;
  return d;
}

}  // namespace ts::profiler
