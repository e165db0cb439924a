#pragma once
// The one clock of trainscope's CPU-side events. memprof and collectors use the same
// formula (steady_clock since its epoch, in nanoseconds), so their timestamps line up.
#include <chrono>
#include <cstdint>

namespace ts::profiler {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace ts::profiler
