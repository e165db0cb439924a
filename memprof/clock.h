#pragma once
// Same formula as profiler/clock.h (steady_clock since its epoch, in ns), so memory changes
// and profiler events share one time axis. Duplicated because memprof must not depend on profiler.
#include <chrono>
#include <cstdint>

namespace ts::memprof {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace ts::memprof
