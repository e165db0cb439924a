#pragma once
// The one clock of trainscope: steady_clock since its epoch, in nanoseconds. Events, memory
// changes, samples and CUPTI's records all take their time from here, so they share one axis.
#include <chrono>
#include <cstdint>

namespace ts::vocabulary {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace ts::vocabulary
