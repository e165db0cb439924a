#include "profiler/cupti_kinds.h"

#include <algorithm>
#include <stdexcept>

namespace ts::profiler {

std::span<const CUpti_ActivityKind> cupti_activity_kinds() {
  static constexpr CUpti_ActivityKind kKinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
      CUPTI_ACTIVITY_KIND_MEMCPY,
      CUPTI_ACTIVITY_KIND_MEMSET,
      CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
      CUPTI_ACTIVITY_KIND_RUNTIME,
      CUPTI_ACTIVITY_KIND_DRIVER,  // cuDNN and cuBLAS launch through the driver API
      CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
      CUPTI_ACTIVITY_KIND_MEMORY2,
      CUPTI_ACTIVITY_KIND_OVERHEAD,
  };
  return kKinds;
}

std::string cupti_kind_name(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "kernel";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "memcpy";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "memset";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "synchronization";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "runtime";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "driver";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return "external_correlation";
    case CUPTI_ACTIVITY_KIND_MEMORY2: return "memory";
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return "overhead";
    default: return "kind " + std::to_string(static_cast<int>(kind));
  }
}

std::vector<CUpti_ActivityKind> cupti_activity_kinds_without(std::string_view leave_out) {
  const auto all = cupti_activity_kinds();
  std::vector<CUpti_ActivityKind> kinds(all.begin(), all.end());
  size_t at = 0;
  while (at <= leave_out.size() && !leave_out.empty()) {
    const size_t comma = std::min(leave_out.find(',', at), leave_out.size());
    const std::string name(leave_out.substr(at, comma - at));
    at = comma + 1;
    if (name.empty()) continue;
    if (name == "kernel") throw std::invalid_argument("TS_CUPTI_LEAVE_OUT: the kernels cannot be left out");
    const auto it =
        std::find_if(kinds.begin(), kinds.end(), [&](CUpti_ActivityKind k) { return cupti_kind_name(k) == name; });
    if (it == kinds.end()) {
      std::string known;
      for (const CUpti_ActivityKind k : all) {
        if (k != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) known += (known.empty() ? "" : ", ") + cupti_kind_name(k);
      }
      throw std::invalid_argument("TS_CUPTI_LEAVE_OUT: '" + name +
                                  "' is not a kind the tracer enables (or is named twice); "
                                  "the kinds: " +
                                  known);
    }
    kinds.erase(it);
  }
  return kinds;
}

}  // namespace ts::profiler
